"""Anthropic's own error objects, `{"type": "error", "error": {"type": ..., "message": ...}}`,
when they arrive inside a 2xx answer or as a stream's `error` event. HTTP statuses go through
`providers.status` and transport exceptions through `providers.http`, as in every adapter.

The error's `type` picks the class by the HTTP status Anthropic documents for it, so an
`overloaded_error` event is `UpstreamUnavailable` (the gateway may fall back) exactly as a 529
answer is; `not_a_stream` reads a 2xx JSON answer to a stream request the same way.
"""

from __future__ import annotations

import msgspec

from providers.anthropic.wire import ErrorObject, Message
from providers.errors import ProviderError, UpstreamRejectedRequest, UpstreamUnavailable
from providers.upstream import json_instead_of_stream

__all__ = ["error_event", "not_a_stream"]

# type -> (class, the HTTP status Anthropic answers that type with)
_ERRORS: dict[str, tuple[type[ProviderError], int]] = {
    "invalid_request_error": (UpstreamRejectedRequest, 400),
    "not_found_error": (UpstreamRejectedRequest, 404),
    "request_too_large": (UpstreamRejectedRequest, 413),
    "authentication_error": (ProviderError, 401),
    "billing_error": (ProviderError, 402),
    "permission_error": (ProviderError, 403),
    "rate_limit_error": (UpstreamUnavailable, 429),
    "api_error": (ProviderError, 500),
    "timeout_error": (ProviderError, 504),
    "overloaded_error": (UpstreamUnavailable, 529),
}


def error_event(error: ErrorObject | None) -> ProviderError:
    """The provider error for an error object sent with a 2xx status (unknown type: 500)."""
    if error is None:
        error = ErrorObject()
    cls, status = _ERRORS.get(error.type, (ProviderError, 500))
    message = error.message[:500] or "no message"
    if cls is not UpstreamRejectedRequest:  # a rejection's message is shown to the caller as is
        message = f"upstream reported {error.type or 'an error'}: {message}"
    return cls(message, upstream_status=status)


def not_a_stream(raw: bytes) -> ProviderError:
    """A 2xx JSON answer to a stream request: its error object, if it is one."""
    try:
        message = msgspec.json.decode(raw, type=Message)
    except (msgspec.DecodeError, msgspec.ValidationError):
        message = None
    if message is not None and message.type == "error":
        return error_event(message.error)
    return json_instead_of_stream(raw)
