"""The framework's exception handler: every exception becomes the envelope response.

What an error carries for the call (its resolved model, the caller's rate state) goes to the
request's context, for the x-ratelimit-* headers and the log line, as a success's outcome does;
a path of another client dialect gets the error in that dialect's shape (`RequestContext.
render_error`, set by its controller);
a call that reached an upstream also says which model and route (`x-gateway-model`,
`x-gateway-route`); a 429's Retry-After comes from its rate state. A failure caused by the
connection ending first (the client left mid-body) is no server error: nothing is logged here,
the middleware counts it as the protocol noted.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response

from gateway.chat.outcomes import MODEL_HEADER, ROUTE_HEADER
from gateway.errors import GatewayError, RateLimited
from gateway.http.context import SCOPE_KEY, RequestContext
from gateway.http.envelope import envelope_bytes
from gateway.http.framework_errors import error_of
from gateway.http.protocol import CONNECTION_ENDED
from gateway.http.ratelimit_headers import retry_after_seconds
from gateway.ids import new_request_id
from gateway.logging import get_logger
from gateway.store.base import RateState

__all__ = ["handle_exception"]

_log = get_logger("gateway.errors")


def handle_exception(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    error = error_of(exc)
    ctx: RequestContext | None = request.scope.get(SCOPE_KEY)  # type: ignore[assignment]
    request_id = ctx.request_id if ctx is not None else new_request_id()
    if ctx is not None:
        ctx.error_code = error.code
        if error.model is not None:
            ctx.model = error.model
        if isinstance(error.rate, RateState):
            ctx.rate = error.rate
        ctx.routing = error.route
        ctx.upstream_seconds = error.upstream_seconds
    if type(error) is GatewayError and CONNECTION_ENDED not in request.scope:
        _log.error("unhandled_exception", request_id=request_id, exc_info=exc)
    headers = dict(error.headers)
    status, content = error.status_code, None
    if ctx is not None and ctx.render_error is not None:
        status, content, shaped = ctx.render_error(error, request_id)
        headers.update(shaped)
    if error.route is not None and error.model is not None:
        headers[MODEL_HEADER] = error.model
        headers[ROUTE_HEADER] = error.route
    if isinstance(error, RateLimited) and "Retry-After" not in headers:
        rate = error.rate
        headers["Retry-After"] = str(
            retry_after_seconds(rate) if isinstance(rate, RateState) else 1
        )
    return Response(
        content=envelope_bytes(error, request_id) if content is None else content,
        status_code=status,
        media_type="application/json",
        headers=headers,
    )
