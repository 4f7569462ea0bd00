"""What the task client raises: the gateway's error envelope as exceptions, plus its own.

    ClientError                          anything the client raises on purpose
    ├── TransportError                   no answer: connect failed, timed out, connection broke
    ├── ProtocolError                    an answer that is not what the API documents
    ├── WaitTimeout                      `wait()` ran out of time; `.task` is the last seen
    ├── TaskNotFinished                  `download()` of a task that has not succeeded
    ├── DownloadError                    a file came back short or not at all
    └── ApiError                         the gateway answered with the error envelope
        ├── BadRequest                   400 invalid_request
        ├── AuthenticationError          401 invalid_api_key
        ├── InsufficientCredits          402 insufficient_credits
        ├── NotFound                     404 not_found
        ├── Conflict                     409 idempotency_request_in_progress (retryable)
        ├── PayloadTooLarge              413 payload_too_large
        ├── UnsupportedMediaType         415 unsupported_media_type
        ├── ValidationError              422 validation_error
        │   └── IdempotencyKeyReused     422 idempotency_key_reused
        ├── RateLimited                  429 rate_limited (retryable, `retry_after`)
        └── ServerError                  5xx internal_error
            ├── UpstreamError            502 upstream_error (retryable)
            ├── ServiceUnavailable       503 model_unavailable, store_unavailable (retryable)
            └── UpstreamTimeout          504 upstream_timeout (retryable)

An `ApiError` carries the envelope's `code`, `message`, `retryable`, `request_id` and
`details`, the HTTP `status`, and `retry_after` (seconds) when the answer had `Retry-After`.
The class is picked by `code` first, so a code the client knows keeps its meaning whatever the
status; an unknown code falls back to the status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from gateway.client.models import Task

__all__ = [
    "ApiError",
    "AuthenticationError",
    "BadRequest",
    "ClientError",
    "Conflict",
    "DownloadError",
    "ErrorDetail",
    "IdempotencyKeyReused",
    "InsufficientCredits",
    "NotFound",
    "PayloadTooLarge",
    "ProtocolError",
    "RateLimited",
    "ServerError",
    "ServiceUnavailable",
    "TaskNotFinished",
    "TransportError",
    "UnsupportedMediaType",
    "UpstreamError",
    "UpstreamTimeout",
    "ValidationError",
    "WaitTimeout",
    "error_from_response",
]


class ErrorDetail(msgspec.Struct, kw_only=True):
    """One offending field of a rejected request."""

    field: str = ""
    message: str = ""


class _ErrorBody(msgspec.Struct, kw_only=True):
    code: str = "unknown_error"
    message: str = ""
    retryable: bool = False
    request_id: str | None = None
    details: list[ErrorDetail] | None = None


class _Envelope(msgspec.Struct, kw_only=True):
    error: _ErrorBody


_DECODE_ENVELOPE = msgspec.json.Decoder(_Envelope)


class ClientError(Exception):
    """Base of everything the task client raises on purpose."""


class TransportError(ClientError):
    """The request got no answer (connection refused or broken, timeout), after any retries."""


class ProtocolError(ClientError):
    """A 2xx answer whose body is not the documented resource (wrong URL, a proxy's page)."""


class WaitTimeout(ClientError):
    """`wait()` gave up before the task reached a terminal status."""

    def __init__(self, message: str, task: Task) -> None:
        super().__init__(message)
        self.task = task


class TaskNotFinished(ClientError):
    """Files were asked for a task that has not succeeded (yet, or at all)."""

    def __init__(self, message: str, task: Task) -> None:
        super().__init__(message)
        self.task = task


class DownloadError(ClientError):
    """A file's bytes did not arrive whole; nothing was left at the destination."""


class ApiError(ClientError):
    """The gateway's error envelope; subclasses name the codes a caller may act on."""

    status_code: int = 0
    codes: tuple[str, ...] = ()
    """The envelope codes this class stands for."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int,
        retryable: bool = False,
        request_id: str | None = None,
        details: list[ErrorDetail] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.retryable = retryable
        self.request_id = request_id
        self.details = details or []
        self.retry_after = retry_after

    def __str__(self) -> str:
        text = f"{self.status} {self.code}: {self.message}"
        return f"{text} (request {self.request_id})" if self.request_id else text


class BadRequest(ApiError):
    status_code = 400
    codes: tuple[str, ...] = ("invalid_request",)


class AuthenticationError(ApiError):
    status_code = 401
    codes: tuple[str, ...] = ("invalid_api_key",)


class InsufficientCredits(ApiError):
    status_code = 402
    codes: tuple[str, ...] = ("insufficient_credits",)


class NotFound(ApiError):
    status_code = 404
    codes: tuple[str, ...] = ("not_found",)


class Conflict(ApiError):
    status_code = 409
    codes: tuple[str, ...] = ("idempotency_request_in_progress",)


class PayloadTooLarge(ApiError):
    status_code = 413
    codes: tuple[str, ...] = ("payload_too_large",)


class UnsupportedMediaType(ApiError):
    status_code = 415
    codes: tuple[str, ...] = ("unsupported_media_type",)


class ValidationError(ApiError):
    status_code = 422
    codes: tuple[str, ...] = ("validation_error",)


class IdempotencyKeyReused(ValidationError):
    status_code = 422
    codes: tuple[str, ...] = ("idempotency_key_reused",)


class RateLimited(ApiError):
    status_code = 429
    codes: tuple[str, ...] = ("rate_limited",)


class ServerError(ApiError):
    status_code = 500
    codes: tuple[str, ...] = ("internal_error",)


class UpstreamError(ServerError):
    status_code = 502
    codes: tuple[str, ...] = ("upstream_error",)


class ServiceUnavailable(ServerError):
    status_code = 503
    codes: tuple[str, ...] = ("model_unavailable", "store_unavailable")


class UpstreamTimeout(ServerError):
    status_code = 504
    codes: tuple[str, ...] = ("upstream_timeout",)


_CLASSES: tuple[type[ApiError], ...] = (
    BadRequest,
    AuthenticationError,
    InsufficientCredits,
    NotFound,
    Conflict,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationError,
    IdempotencyKeyReused,
    RateLimited,
    ServerError,
    UpstreamError,
    ServiceUnavailable,
    UpstreamTimeout,
)
_BY_CODE = {code: cls for cls in _CLASSES for code in cls.codes}
_BY_STATUS = {cls.status_code: cls for cls in _CLASSES if cls is not IdempotencyKeyReused}


def _class_for(code: str, status: int) -> type[ApiError]:
    if code in _BY_CODE:
        return _BY_CODE[code]
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else ApiError


def error_from_response(
    status: int, body: bytes, *, request_id: str | None, retry_after: float | None
) -> ApiError:
    """The exception for a non-2xx answer; a body that is not the envelope (a proxy's page)
    still gives the status's class, retryable when the status says the failure is passing."""
    try:
        parsed = _DECODE_ENVELOPE.decode(body).error
    except msgspec.DecodeError:
        passing = status in (429, 502, 503, 504)
        text = body[:200].decode("utf-8", "replace").strip() or f"HTTP {status}"
        parsed = _ErrorBody(code=f"http_{status}", message=text, retryable=passing)
    cls = _class_for(parsed.code, status)
    return cls(
        parsed.message,
        code=parsed.code,
        status=status,
        retryable=parsed.retryable,
        request_id=parsed.request_id or request_id,
        details=parsed.details,
        retry_after=retry_after,
    )
