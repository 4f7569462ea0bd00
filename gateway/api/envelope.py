"""The error envelope: the one renderer for every failure the gateway answers with."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response

from gateway.context import SCOPE_KEY, RequestContext
from gateway.error_mapping import as_gateway_error
from gateway.errors import ErrorDetail, GatewayError, RateLimited
from gateway.ids import new_request_id
from gateway.logging import get_logger

__all__ = ["ErrorBody", "envelope_bytes", "handle_exception"]

_log = get_logger("gateway.errors")


class _Error(msgspec.Struct, kw_only=True):
    code: str
    message: str
    retryable: bool
    request_id: str
    details: list[ErrorDetail] | None = None
    type: str = "gateway_error"
    param: str | None = None


class ErrorBody(msgspec.Struct, kw_only=True):
    error: _Error


def envelope_bytes(error: GatewayError, request_id: str) -> bytes:
    body = _Error(
        code=error.code,
        message=error.message,
        retryable=error.retryable,
        request_id=request_id,
        details=error.details or None,
        type=_openai_type(error.status_code),
        param=error.details[0].field if error.details else None,
    )
    return msgspec.json.encode(ErrorBody(error=body))


def _openai_type(status: int) -> str:
    """OpenAI SDKs read `error.type`; give them the family they expect."""
    if status in (400, 404, 409, 413, 415, 422):
        return "invalid_request_error"
    if status == 401:
        return "authentication_error"
    if status == 402:
        return "insufficient_quota"
    if status == 429:
        return "rate_limit_error"
    return "server_error" if status >= 500 else "gateway_error"


def handle_exception(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    error = as_gateway_error(exc)
    ctx: RequestContext | None = request.scope.get(SCOPE_KEY)  # type: ignore[assignment]
    request_id = ctx.request_id if ctx is not None else new_request_id()
    if ctx is not None:
        ctx.error_code = error.code
    if type(error) is GatewayError:
        _log.error("unhandled_exception", request_id=request_id, exc_info=exc)
    headers = dict(error.headers)
    if isinstance(error, RateLimited) and "Retry-After" not in headers:
        headers["Retry-After"] = "1"
    return Response(
        content=envelope_bytes(error, request_id),
        status_code=error.status_code,
        media_type="application/json",
        headers=headers,
    )
