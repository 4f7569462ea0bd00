"""The framework's exceptions (routing, method, body validation, sizes) in the gateway's own
error tree; upstream failures are `gateway.routing.upstream_errors`'s. Together they are the one
place where an exception gets its status and code.
"""

from __future__ import annotations

from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
    ValidationException,
)

from gateway.errors import (
    ErrorDetail,
    GatewayError,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
    fields_message,
)
from gateway.routing.upstream_errors import as_gateway_error

__all__ = ["error_of"]


def error_of(exc: BaseException) -> GatewayError:
    """Any exception as the error in the envelope."""
    if isinstance(exc, HTTPException):
        return _from_http(exc)
    return as_gateway_error(exc)


def _from_http(exc: HTTPException) -> GatewayError:
    if isinstance(exc, NotFoundException):
        return NotFound("No such endpoint." if exc.detail == "Not Found" else exc.detail)
    if isinstance(exc, MethodNotAllowedException):
        return MethodNotAllowed()
    if isinstance(exc, ValidationException):
        details = [
            ErrorDetail(field=str(item.get("key", "")), message=str(item.get("message", "")))
            for item in (exc.extra if isinstance(exc.extra, list) else [])
            if isinstance(item, dict)
        ]
        return ValidationFailed(fields_message(details) or None, details=details)
    if exc.status_code == 413:
        return PayloadTooLarge()
    if exc.status_code == 415:
        return UnsupportedMediaType()
    if 400 <= exc.status_code < 500:
        return ValidationFailed(exc.detail)
    return GatewayError()
