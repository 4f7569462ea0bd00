"""The request path's endpoints served without Litestar's router: an exact path, one dict lookup.

For every request Litestar's router normalises the path, checks the Host header, finds the
route, resolves its exception handlers and copies the scope; for the plain ASGI handlers of the
request path (chat, Messages, Responses, embeddings) that is work whose answer never changes.
`DirectRoutes` calls such a handler itself when the path is exactly its own and the Host header
is one the router would take; anything else (another path, a path the router would normalise,
an odd Host, a root path) goes through the router as before. An error before the answer began
is rendered by the same exception handler the router's middleware would call, so every
dialect's envelope, header and log line is unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from litestar import Request, Response

from gateway.http.context import SCOPE_KEY

__all__ = ["DirectRoutes"]

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]
Handler = Callable[..., Awaitable[None]]

_HOST = re.compile(rb"\A[0-9A-Za-z!$&'()*+,;=\-._~:\[\]@%]*\Z")
"""The Host values Litestar's router accepts (any other is its 400)."""


class DirectRoutes:
    """Wraps Litestar's ASGI handler (`fallback`): `routes` maps an exact path to a plain ASGI
    handler with no guards, middleware or path parameters (`route_handler`, its Litestar
    handler object, stays in the scope as the router would leave it)."""

    def __init__(
        self,
        routes: Mapping[str, tuple[Handler, Any]],
        fallback: ASGIApp,
        on_error: Callable[[Request[Any, Any, Any], Exception], Response[Any]],
    ) -> None:
        self._routes = dict(routes)
        self._fallback = fallback
        self._on_error = on_error

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path")  # a lifespan scope has none
        route = self._routes.get(path) if scope["type"] == "http" else None
        if route is not None:
            host = scope[SCOPE_KEY].host  # read in the middleware's one pass over the headers
            if scope.get("root_path") or (host is not None and _HOST.match(host) is None):
                route = None
        if route is None:
            await self._fallback(scope, receive, send)
            return
        handler, route_handler = route
        scope["path_params"] = {}
        scope["route_handler"] = route_handler
        scope["path_template"] = path
        try:
            await handler(scope, receive, send)
        except Exception as exc:
            if scope[SCOPE_KEY].response_started:  # too late for an error answer
                raise
            request: Request[Any, Any, Any] = Request(scope, receive, send)
            response = self._on_error(request, exc)
            await response.to_asgi_response(app=None, request=request)(scope, receive, send)
