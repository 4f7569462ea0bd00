"""Every exception that can reach a client, translated into the gateway's own error tree.

This is the one place where framework and provider failures get their status and code.
"""

from __future__ import annotations

import math

from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
    ValidationException,
)

from gateway.errors import (
    ErrorDetail,
    GatewayError,
    InvalidRequest,
    MethodNotAllowed,
    ModelUnavailable,
    NotFound,
    PayloadTooLarge,
    UnsupportedMediaType,
    UpstreamFailed,
    UpstreamTimedOut,
    ValidationFailed,
)
from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)

__all__ = ["as_gateway_error"]


def as_gateway_error(exc: BaseException) -> GatewayError:
    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, ProviderError):
        return _from_provider(exc)
    if isinstance(exc, HTTPException):
        return _from_http(exc)
    return GatewayError()


def _from_provider(exc: ProviderError) -> GatewayError:
    if isinstance(exc, UpstreamRejectedRequest):
        return InvalidRequest(f"The model rejected the request: {exc.message}")
    error: GatewayError
    if isinstance(exc, UpstreamUnavailable):
        error = ModelUnavailable()
    elif isinstance(exc, UpstreamTimeout):
        error = UpstreamTimedOut()
    else:
        error = UpstreamFailed()
    if exc.retry_after is not None and exc.retry_after > 0:
        # The upstream said when to come back: so does the gateway, in whole seconds.
        error.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return error


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
        return ValidationFailed(details=details)
    if exc.status_code == 413:
        return PayloadTooLarge()
    if exc.status_code == 415:
        return UnsupportedMediaType()
    if 400 <= exc.status_code < 500:
        return ValidationFailed(exc.detail)
    return GatewayError()
