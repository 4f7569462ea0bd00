"""Errors in Anthropic's shape, for the Messages API paths: the gateway's error tree rendered
as Anthropic's API answers, so its SDKs raise their own typed errors.

    {"type": "error",
     "error": {"type": "billing_error", "message": "...",
               "details": {"error_code": "insufficient_credits", "retryable": false,
                           "fields": [{"field": "max_tokens", "message": "..."}]}},
     "request_id": "req_..."}

`error.type` is Anthropic's family for the status; the gateway's own code (the envelope's
`code`, what its docs and logs speak of) is `error.details.error_code`, where the Anthropic
SDKs read a cause's code (`APIStatusError.error_code`); the request id is in the body and in
the `request-id` header, as Anthropic sends it (the SDKs' `request_id`). Statuses are the
gateway's, but for `model_unavailable` (an upstream overloaded, unreachable or throttled, every
breaker open): 529 `overloaded_error`, Anthropic's answer when its models are overloaded, which
its clients wait out and retry.
"""

from __future__ import annotations

import msgspec

from gateway.errors import ErrorDetail, GatewayError, ModelUnavailable

__all__ = ["OVERLOADED_STATUS", "error_body", "error_response", "error_type"]

OVERLOADED_STATUS = 529

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    OVERLOADED_STATUS: "overloaded_error",
}


class _Details(msgspec.Struct, kw_only=True, omit_defaults=True):
    error_code: str
    retryable: bool
    fields: list[ErrorDetail] | None = None


class _Error(msgspec.Struct, kw_only=True):
    type: str
    message: str
    details: _Details


class _Body(msgspec.Struct, kw_only=True):
    type: str
    error: _Error
    request_id: str


def _status(error: GatewayError) -> int:
    return OVERLOADED_STATUS if isinstance(error, ModelUnavailable) else error.status_code


def error_type(status: int) -> str:
    """Anthropic's error family for a status (4xx not listed: invalid_request_error)."""
    return _TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")


def error_body(error: GatewayError, request_id: str) -> bytes:
    details = _Details(
        error_code=error.code, retryable=error.retryable, fields=error.details or None
    )
    kind = error_type(_status(error))
    body = _Body(
        type="error",
        error=_Error(type=kind, message=error.message, details=details),
        request_id=request_id,
    )
    return msgspec.json.encode(body)


def error_response(error: GatewayError, request_id: str) -> tuple[int, bytes, dict[str, str]]:
    """Status, body and the headers Anthropic adds (`request-id`): for the exception handler."""
    return _status(error), error_body(error, request_id), {"request-id": request_id}
