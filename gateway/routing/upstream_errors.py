"""Upstream failures in the gateway's own error tree: the one place where a provider's error
gets its status and code (the HTTP edge adds the framework's, `gateway.http.framework_errors`).

    UpstreamRejectedRequest   400 invalid_request, with the upstream's message (or, when
                              the adapter refused a field before sending, naming the field)
    UpstreamModelFailed       502 upstream_error, with the upstream's message; retryable as
                              the adapter says (an interrupted job is, a failed one is not)
    UpstreamUnavailable       503 model_unavailable
    UpstreamTimeout           504 upstream_timeout
    other ProviderError       502 upstream_error

Only rejections and model failures quote the upstream: their words are about the request or
the model; other messages may name the gateway's own setup and stay in the log.
"""

from __future__ import annotations

import math

from gateway.errors import (
    ErrorDetail,
    GatewayError,
    InvalidRequest,
    ModelFailed,
    ModelUnavailable,
    UpstreamFailed,
    UpstreamTimedOut,
)
from providers.errors import (
    ProviderError,
    UpstreamModelFailed,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)

__all__ = ["as_gateway_error"]


def as_gateway_error(exc: BaseException) -> GatewayError:
    """`exc` as the error a client sees; anything unknown is a fault of the gateway's (500)."""
    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, ProviderError):
        return _from_provider(exc)
    return GatewayError()


def _from_provider(exc: ProviderError) -> GatewayError:
    if isinstance(exc, UpstreamRejectedRequest):
        if exc.field is not None:  # the adapter refused it before sending: the gateway's word
            detail = ErrorDetail(field=exc.field, message=exc.message)
            return InvalidRequest(f"{exc.field}: {exc.message}", details=[detail])
        return InvalidRequest(f"The model rejected the request: {exc.message}")
    error: GatewayError
    if isinstance(exc, UpstreamModelFailed):
        kind = ModelFailed if not exc.retryable else UpstreamFailed
        error = kind(f"The model failed: {exc.message}")
    elif isinstance(exc, UpstreamUnavailable):
        error = ModelUnavailable()
    elif isinstance(exc, UpstreamTimeout):
        error = UpstreamTimedOut()
    else:
        error = UpstreamFailed()
    if exc.retry_after is not None and exc.retry_after > 0:
        # The upstream said when to come back: so does the gateway, in whole seconds.
        error.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return error
