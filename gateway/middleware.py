"""The outermost layer: request id, timer, response headers and the one log line per request.

It wraps Litestar's whole ASGI handler (not a route), so routing errors pass through it too.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.auth import DUPLICATE
from gateway.context import SCOPE_KEY, RequestContext
from gateway.ids import accept_request_id
from gateway.logging import get_logger
from gateway.ratelimit_headers import rate_limit_headers

__all__ = ["RequestContextMiddleware"]

ASGIApp = Any

_log = get_logger("gateway.access")


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        client_id = authorization = idempotency_key = None
        content_type = ""
        for name, value in scope["headers"]:
            if name == b"authorization":
                # Two credentials are ambiguous: refused like a malformed one.
                authorization = DUPLICATE if authorization is not None else value.decode("latin-1")
            elif name == b"content-type":
                content_type = value.decode("latin-1")
            elif name == b"x-request-id":
                client_id = value.decode("latin-1")
            elif name == b"idempotency-key":
                idempotency_key = value.decode("latin-1")
        ctx = RequestContext(
            request_id=accept_request_id(client_id),
            started=time.perf_counter(),
            authorization=authorization,
            content_type=content_type,
            idempotency_key=idempotency_key,
        )
        scope[SCOPE_KEY] = ctx
        status = 500

        async def send_with_headers(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers") or ())
                headers.append((b"x-request-id", ctx.request_id.encode()))
                if ctx.rate is not None:
                    headers.extend(rate_limit_headers(ctx.rate))
                message["headers"] = headers
            await send(message)

        try:
            await self._app(scope, receive, send_with_headers)
        finally:
            _log.info(
                "request",
                request_id=ctx.request_id,
                method=scope["method"],
                route=scope["path"],
                status=status,
                tenant=ctx.tenant,
                model=ctx.model,
                error=ctx.error_code,
                replayed=ctx.replayed or None,
                latency_ms=round((time.perf_counter() - ctx.started) * 1000, 3),
            )
