"""The gateway's one error tree; `gateway.http.exception_handler` renders each as the envelope.

    GatewayError                      500 internal_error (retryable)
    ├── InvalidRequest                400 invalid_request           (chat bodies)
    │   └── PreviousResponseNotFound  400 previous_response_not_found (OpenAI's, Responses API)
    ├── ValidationFailed              422 validation_error          (other bodies, queries)
    ├── InvalidApiKey                 401 invalid_api_key
    ├── InvalidAdminToken             401 invalid_admin_token       (/admin/v1)
    ├── InsufficientCredits           402 insufficient_credits
    │   └── KeyBudgetExceeded         402 key_budget_exceeded       (details: resets_at)
    ├── AdminDisabled                 403 admin_disabled            (/admin/v1, no admin token)
    ├── NotFound                      404 not_found
    │   ├── TenantNotFound            404 tenant_not_found
    │   └── KeyNotFound               404 key_not_found
    ├── MethodNotAllowed              405 method_not_allowed
    ├── RequestTimedOut               408 request_timeout (retryable)
    ├── IdempotencyInProgress         409 idempotency_request_in_progress (retryable)
    ├── EntryIdReused                 409 entry_id_reused           (a ledger entry id)
    ├── PayloadTooLarge               413 payload_too_large
    ├── UnsupportedMediaType          415 unsupported_media_type
    ├── RangeNotSatisfiable           416 range_not_satisfiable    (Content-Range: bytes */size)
    ├── IdempotencyKeyReused          422 idempotency_key_reused
    ├── RateLimited                   429 rate_limited (retryable, Retry-After)
    ├── RequestHeadTooLarge           431 request_headers_too_large
    ├── NotImplementedYet             501 not_implemented
    ├── UpstreamFailed                502 upstream_error (retryable)
    │   └── ModelFailed               502 upstream_error (the model failed at the request)
    ├── ModelUnavailable              503 model_unavailable (retryable)
    ├── UpstreamTimedOut              504 upstream_timeout (retryable)
    ├── OutcomeUnknown                504 outcome_unknown           (a money write; its id)
    └── StoreUnavailable              503 store_unavailable (retryable)

Each class carries its status, code and retryability, so raising code never picks numbers.
A refusal that is not retryable but has a status the OpenAI and Anthropic SDKs retry on their
own (408, 409, 429, 5xx: a 501, a reused ledger entry id) carries `x-should-retry: false`,
the header those SDKs obey, so they do not send it again three times.
An error raised for a call may also carry what the response and its log line report whatever
the outcome: the resolved `model`, the caller's rate-limit state (`rate`, for the
x-ratelimit-* headers) and, once upstreams were tried, the `route` taken (what failed where).
Services set them; `gateway.api` renders them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import msgspec

__all__ = [
    "AdminDisabled",
    "EntryIdReused",
    "ErrorDetail",
    "GatewayError",
    "IdempotencyInProgress",
    "IdempotencyKeyReused",
    "InsufficientCredits",
    "InvalidAdminToken",
    "InvalidApiKey",
    "InvalidRequest",
    "KeyBudgetExceeded",
    "KeyNotFound",
    "MethodNotAllowed",
    "ModelFailed",
    "ModelUnavailable",
    "NotFound",
    "NotImplementedYet",
    "OutcomeUnknown",
    "PayloadTooLarge",
    "PreviousResponseNotFound",
    "RangeNotSatisfiable",
    "RateLimited",
    "RequestHeadTooLarge",
    "RequestTimedOut",
    "StoreUnavailable",
    "TenantNotFound",
    "UnsupportedMediaType",
    "UpstreamFailed",
    "UpstreamTimedOut",
    "ValidationFailed",
    "decode_detail",
    "fields_message",
]


class ErrorDetail(msgspec.Struct, kw_only=True):
    """One offending field of a rejected request."""

    field: str
    message: str


def fields_message(details: Sequence[ErrorDetail]) -> str:
    """The one-line message of a refusal with details: `field: problem; field: problem`."""
    return "; ".join(f"{d.field}: {d.message}" for d in details)


_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}
_TYPE_NAME = re.compile(r"`([^`]+)`")


def _words(types: re.Match[str]) -> str:
    names = [name.strip() for name in types.group(1).split("|")]
    return " or ".join(_TYPE_WORDS.get(name, name) for name in names)


def decode_detail(exc: msgspec.ValidationError, *, unknown_hint: str = "") -> ErrorDetail:
    """The field a decoder's validation error is about, as the client wrote it (a dotted path,
    `messages[2].role`), and the problem in the gateway's words rather than the decoder's.

    An unknown field is named itself (`colour`, `messages[0].colour`) with `unknown field`,
    plus `unknown_hint` when it is at the top level (where a caller may say where such
    options go). Bodies, routing files and query values all say it this way."""
    text, _, at = str(exc).partition(" - at `$")
    # msgspec writes a mapping's value as `[...]` (it does not say which key): name the map.
    field = at.rstrip("`").lstrip(".").replace("[...]", "") if at else ""
    if text.startswith(("Object contains unknown field", "Object missing required field")):
        name = text.split("`")[1] if "`" in text else ""
        unknown = text.startswith("Object contains")
        message = "this field is required"
        if unknown:
            message = "unknown field" + (f"; {unknown_hint}" if unknown_hint and not field else "")
        return ErrorDetail(field=f"{field}.{name}" if field else name, message=message)
    if text.startswith("Expected "):
        text = "expected " + _TYPE_NAME.sub(_words, text[len("Expected ") :])
    elif text.startswith("Invalid enum value"):
        text = text.removeprefix("Invalid enum value ") + " is not one of the allowed values"
    else:
        text = text[:1].lower() + text[1:]
    return ErrorDetail(field=field or "body", message=text)


_SDK_RETRIED = frozenset({408, 409, 429})
"""Statuses below 500 that the OpenAI and Anthropic SDKs retry unless told not to."""


class GatewayError(Exception):
    status_code: int = 500
    code: str = "internal_error"
    retryable: bool = True
    default_message: str = "The server failed to handle the request."
    model: str | None = None
    """The model the failed call was resolved to (for the log line), when it got that far."""
    rate: object | None = None
    """The caller's rate-limit state after its check (a `gateway.store.RateState`), when it got
    that far: the HTTP edge renders it as the x-ratelimit-* headers, and a 429's Retry-After."""
    route: str | None = None
    """How the call was routed when it reached an upstream (`x-gateway-route`; `model` is
    then the model that answered, or the last one tried)."""
    upstream_seconds: float = 0.0
    """Time the failed call spent waiting for upstreams (for the overhead metric)."""

    def __init__(
        self,
        message: str | None = None,
        *,
        details: Sequence[ErrorDetail] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.message = message or self.default_message
        self.details = list(details)
        self.headers = dict(headers or {})
        if not self.retryable and (self.status_code in _SDK_RETRIED or self.status_code >= 500):
            self.headers["x-should-retry"] = "false"
        super().__init__(self.message)


class InvalidRequest(GatewayError):
    status_code, code, retryable = 400, "invalid_request", False
    default_message = "The request body is invalid."


class PreviousResponseNotFound(InvalidRequest):
    """A Responses API request continues from a response this tenant has no stored (OpenAI
    answers an unknown `previous_response_id` with this status and code)."""

    code = "previous_response_not_found"


class ValidationFailed(GatewayError):
    status_code, code, retryable = 422, "validation_error", False
    default_message = "The request failed validation."


class InvalidApiKey(GatewayError):
    status_code, code, retryable = 401, "invalid_api_key", False
    default_message = "Missing or invalid API key. Send 'Authorization: Bearer <API_KEY>'."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


class InvalidAdminToken(GatewayError):
    status_code, code, retryable = 401, "invalid_admin_token", False
    default_message = "Missing or invalid admin token. Send 'Authorization: Bearer <admin token>'."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


class AdminDisabled(GatewayError):
    status_code, code, retryable = 403, "admin_disabled", False
    default_message = (
        "The admin API is disabled: no admin token is configured. Make one with "
        "'gateway admin token', set GATEWAY_ADMIN_TOKEN_HASH to the hash it prints, and restart."
    )


class InsufficientCredits(GatewayError):
    status_code, code, retryable = 402, "insufficient_credits", False
    default_message = "The wallet balance is too low for this request."


class KeyBudgetExceeded(InsufficientCredits):
    code = "key_budget_exceeded"
    default_message = "This API key's budget for the period is spent."


class NotFound(GatewayError):
    status_code, code, retryable = 404, "not_found", False
    default_message = "The requested resource does not exist."


class TenantNotFound(NotFound):
    code = "tenant_not_found"
    default_message = "No such tenant in the routing file."


class KeyNotFound(NotFound):
    code = "key_not_found"
    default_message = "No such API key."


class MethodNotAllowed(GatewayError):
    status_code, code, retryable = 405, "method_not_allowed", False
    default_message = "The method is not allowed on this path."


class IdempotencyInProgress(GatewayError):
    status_code, code, retryable = 409, "idempotency_request_in_progress", True
    default_message = "A request with this Idempotency-Key is still in progress."


class EntryIdReused(GatewayError):
    status_code, code, retryable = 409, "entry_id_reused", False
    default_message = "This ledger entry id was already used for another amount or kind."


class RequestTimedOut(GatewayError):
    status_code, code, retryable = 408, "request_timeout", True
    default_message = "The request was not received in time."


class PayloadTooLarge(GatewayError):
    status_code, code, retryable = 413, "payload_too_large", False
    default_message = "The request body is too large."


class UnsupportedMediaType(GatewayError):
    status_code, code, retryable = 415, "unsupported_media_type", False
    default_message = "The content type is not supported; send application/json."


class RangeNotSatisfiable(GatewayError):
    status_code, code, retryable = 416, "range_not_satisfiable", False
    default_message = "The requested range is not within the content."

    def __init__(self, size: int) -> None:
        super().__init__(
            f"The requested range is not within the content's {size} bytes.",
            headers={"Content-Range": f"bytes */{size}"},
        )


class IdempotencyKeyReused(GatewayError):
    status_code, code, retryable = 422, "idempotency_key_reused", False
    default_message = "This Idempotency-Key was already used with a different request body."


class RateLimited(GatewayError):
    status_code, code, retryable = 429, "rate_limited", True
    default_message = "Rate limit exceeded; retry after the number of seconds in Retry-After."


class RequestHeadTooLarge(GatewayError):
    status_code, code, retryable = 431, "request_headers_too_large", False
    default_message = "The request line and headers are too large."


class NotImplementedYet(GatewayError):
    status_code, code, retryable = 501, "not_implemented", False
    default_message = "This endpoint is Planned and not callable yet."


class UpstreamFailed(GatewayError):
    status_code, code, retryable = 502, "upstream_error", True
    default_message = "The model request failed upstream."


class ModelFailed(UpstreamFailed):
    """The upstream ran the request and its model failed at it (its words are the message):
    the same request would fail the same way."""

    retryable = False
    default_message = "The model failed to produce a result."


class ModelUnavailable(GatewayError):
    status_code, code, retryable = 503, "model_unavailable", True
    default_message = "The model is temporarily unavailable; retry with 'auto' or another model."


class UpstreamTimedOut(GatewayError):
    status_code, code, retryable = 504, "upstream_timeout", True
    default_message = "The model did not answer in time."


class OutcomeUnknown(GatewayError):
    """A money write the store may or may not have applied (its answer was lost, or too few
    replicas acknowledged it): not retryable as it was sent, only with the same entry id,
    which its details name (a write applies once per id)."""

    status_code, code, retryable = 504, "outcome_unknown", False
    default_message = "The store did not confirm the write; it may have been applied."


class StoreUnavailable(GatewayError):
    status_code, code, retryable = 503, "store_unavailable", True
    default_message = "The gateway's store is unavailable; retry shortly."
