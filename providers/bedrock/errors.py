"""Bedrock's failures, mapped by their cause (the exception's name), not only their status.

An error answer names its exception in the `x-amzn-ErrorType` header
(`ThrottlingException:http://internal.amazon.com/coral/...`) or the body's `__type`, with
`{"message": ...}` (or `Message`) as the body; a stream reports one as an event whose
`:message-type` is `exception`, `:exception-type` its name in lower camel case, and the same
body as payload (or `:message-type: error` with `:error-code` and `:error-message` headers).

    ThrottlingException, ServiceQuotaExceededException     UpstreamUnavailable (429 / 400)
    ModelNotReadyException                                  UpstreamUnavailable (429): the
                                                            model is loading; AWS's SDKs retry
    ServiceUnavailableException                             UpstreamUnavailable (503)
    ValidationException                                     UpstreamRejectedRequest (400)
    ModelTimeoutException                                   UpstreamTimeout (408)
    ModelErrorException                                     UpstreamModelFailed (424)
    ModelStreamErrorException                               UpstreamModelFailed, retryable:
                                                            AWS says to send it again
    AccessDenied, UnrecognizedClient, InvalidSignature,     ProviderError: the gateway's
    ExpiredToken, IncompleteSignature, ...                  credentials (403)
    ResourceNotFoundException                               ProviderError (404): the routing
                                                            file names a model the region lacks
    InternalServerException, anything else                  the shared status table
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from providers.errors import (
    ProviderError,
    UpstreamModelFailed,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.status import error_for_status, message_from_body, retry_after_seconds

__all__ = ["error_for_bedrock_response", "exception_event"]

_UNAVAILABLE = frozenset(
    {
        "ThrottlingException",
        "ServiceQuotaExceededException",
        "ModelNotReadyException",
        "ServiceUnavailableException",
    }
)
_CREDENTIALS = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "IncompleteSignatureException",
        "ExpiredTokenException",
        "MissingAuthenticationTokenException",
        "SignatureDoesNotMatch",
    }
)


class _Body(msgspec.Struct):
    message: str | None = None
    Message: str | None = None
    kind: str | None = msgspec.field(name="__type", default=None)


def error_for_bedrock_response(
    status: int, body: bytes, headers: Mapping[str, str]
) -> ProviderError:
    """The error for a non-2xx answer as read: its status, body and headers."""
    name = (headers.get("x-amzn-ErrorType") or "").split(":", 1)[0]
    try:
        decoded = msgspec.json.decode(body, type=_Body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        decoded = _Body()
    name = name or (decoded.kind or "").rsplit("#", 1)[-1]
    message = decoded.message or decoded.Message or message_from_body(body)
    return classify(name, message, status, retry_after_seconds(headers.get("Retry-After")))


def exception_event(headers: Mapping[str, object], payload: bytes) -> ProviderError:
    """An exception (or error) message of a ConverseStream, after or before its first chunk."""
    if headers.get(":message-type") == "error":
        code = str(headers.get(":error-code") or "error")
        text = str(headers.get(":error-message") or "")
        return ProviderError(f"the upstream's stream failed ({code}): {text}")
    kind = str(headers.get(":exception-type") or "")
    name = kind[:1].upper() + kind[1:]
    message = message_from_body(payload)
    return classify(name, message, None, None)


def classify(
    name: str, message: str, status: int | None, retry_after: float | None
) -> ProviderError:
    """The provider error for a Bedrock exception's name (and the status it came with)."""
    said = f"{name}: {message}" if name else message
    if name in _UNAVAILABLE:
        return UpstreamUnavailable(
            f"the upstream is unavailable ({said})",
            upstream_status=status or (503 if name == "ServiceUnavailableException" else 429),
            retry_after=retry_after,
        )
    if name == "ValidationException":
        return UpstreamRejectedRequest(message, upstream_status=status or 400)
    if name == "ModelTimeoutException":
        return UpstreamTimeout(f"the model ran out of time ({said})", upstream_status=status or 408)
    if name == "ModelErrorException":
        return UpstreamModelFailed(message, upstream_status=status or 424)
    if name == "ModelStreamErrorException":
        return UpstreamModelFailed(message, upstream_status=status or 424, retryable=True)
    if name in _CREDENTIALS:
        return ProviderError(
            f"the upstream refused the gateway's credentials ({said})",
            upstream_status=status or 403,
        )
    if name == "ResourceNotFoundException":
        return ProviderError(
            f"the upstream has no such model ({said})", upstream_status=status or 404
        )
    if status is None:
        return ProviderError(f"the upstream's stream failed ({said})")
    return error_for_status(status, said, retry_after)
