"""The framework's exception handler: every exception becomes the envelope response.

What an error carries for the call (its resolved model, the caller's rate state) goes to the
request's context, for the x-ratelimit-* headers and the log line, as a success's outcome does;
a call that reached an upstream also says which model and route (`x-gateway-model`,
`x-gateway-route`). A failure caused by the connection ending first (the client left mid-body)
is no server error: nothing is logged here, the middleware counts it as the protocol noted.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response

from gateway.chat.outcomes import MODEL_HEADER, ROUTE_HEADER
from gateway.context import SCOPE_KEY, RequestContext
from gateway.envelope import envelope_bytes
from gateway.error_mapping import as_gateway_error
from gateway.errors import GatewayError, RateLimited
from gateway.http_protocol import CONNECTION_ENDED
from gateway.ids import new_request_id
from gateway.logging import get_logger

__all__ = ["handle_exception"]

_log = get_logger("gateway.errors")


def handle_exception(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    error = as_gateway_error(exc)
    ctx: RequestContext | None = request.scope.get(SCOPE_KEY)  # type: ignore[assignment]
    request_id = ctx.request_id if ctx is not None else new_request_id()
    if ctx is not None:
        ctx.error_code = error.code
        if error.model is not None:
            ctx.model = error.model
        if error.rate is not None:
            ctx.rate = error.rate
        ctx.routing = error.route
        ctx.upstream_seconds = error.upstream_seconds
    if type(error) is GatewayError and CONNECTION_ENDED not in request.scope:
        _log.error("unhandled_exception", request_id=request_id, exc_info=exc)
    headers = dict(error.headers)
    if error.route is not None and error.model is not None:
        headers[MODEL_HEADER] = error.model
        headers[ROUTE_HEADER] = error.route
    if isinstance(error, RateLimited) and "Retry-After" not in headers:
        headers["Retry-After"] = "1"
    return Response(
        content=envelope_bytes(error, request_id),
        status_code=error.status_code,
        media_type="application/json",
        headers=headers,
    )
