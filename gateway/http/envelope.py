"""The error envelope's bytes: the one renderer for every failure the gateway answers with,
as a JSON response (`gateway.http.exception_handler`) or as the last event of a broken stream."""

from __future__ import annotations

import msgspec

from gateway.errors import ErrorDetail, GatewayError

__all__ = ["ErrorBody", "ErrorObject", "envelope_bytes"]


class ErrorObject(msgspec.Struct, kw_only=True):
    """`details` lists the offending fields of a rejected request; `type` and `param` are
    OpenAI's (`param`: the first detail's field)."""

    code: str
    message: str
    retryable: bool
    request_id: str
    details: list[ErrorDetail] | None = None
    type: str = "gateway_error"
    param: str | None = None


class ErrorBody(msgspec.Struct, kw_only=True):
    error: ErrorObject


def envelope_bytes(error: GatewayError, request_id: str) -> bytes:
    body = ErrorObject(
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
    if status in (400, 404, 408, 409, 413, 415, 416, 422, 431):
        return "invalid_request_error"
    if status == 401:
        return "authentication_error"
    if status == 402:
        return "insufficient_quota"
    if status == 429:
        return "rate_limit_error"
    return "server_error" if status >= 500 else "gateway_error"
