"""Gemini's own failures, read into `providers.errors` through the shared status table.

error_for_gemini_response(status, body, headers)
    the HTTP status picks the class (`providers.status.error_for_status`) with the
    message of Google's `{"error": {"code", "message", "status", "details"}}` body (also
    the `[{"error": ...}]` list a stream endpoint answers without `alt=sse`);
    one refinement: `status: "DEADLINE_EXCEEDED"` is UpstreamTimeout, since Google says
    the model ran out of time (a bare 504 from a proxy stays a ProviderError)
retry_after: the `Retry-After` header, else the `google.rpc.RetryInfo` detail's
    `retryDelay` ("37s", "1.5s"), which is how Gemini says it on a 429
error_event(error)          an `{"error": ...}` event inside a 200 stream, same table
blocked_prompt(feedback)    `promptFeedback.blockReason` without candidates: rejected
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import msgspec

from providers.errors import ProviderError, UpstreamRejectedRequest, UpstreamTimeout
from providers.gemini.wire import PromptFeedback, WireError
from providers.status import error_for_response, error_for_status, retry_after_seconds

__all__ = ["blocked_prompt", "error_event", "error_for_gemini_response", "retry_delay"]

_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


class _ErrorBody(msgspec.Struct):
    error: WireError | None = None


_decode_error = msgspec.json.Decoder(list[_ErrorBody] | _ErrorBody).decode


def error_for_gemini_response(
    status: int, body: bytes, headers: Mapping[str, str]
) -> ProviderError:
    """The error for a non-2xx answer as read: its status, body and headers."""
    error = _error_from_body(body)
    if error is None:
        return error_for_response(status, body, headers)
    retry_after = retry_after_seconds(headers.get("Retry-After"))
    if retry_after is None:
        retry_after = retry_delay(error.details)
    return _classify(status, error, retry_after)


def error_event(error: WireError) -> ProviderError:
    """An error object sent as an event of a 200 stream; its `code` picks the class."""
    message = error.message or error.status or "no message"
    if error.code < 400:
        return ProviderError(f"upstream reported an error mid-stream: {message}")
    return _classify(error.code, error, retry_delay(error.details))


def blocked_prompt(feedback: PromptFeedback) -> UpstreamRejectedRequest:
    reason = feedback.block_reason or "BLOCK_REASON_UNSPECIFIED"
    detail = f": {feedback.block_reason_message}" if feedback.block_reason_message else ""
    return UpstreamRejectedRequest(f"the upstream blocked the prompt ({reason}){detail}")


def retry_delay(details: list[object]) -> float | None:
    """Seconds from a `google.rpc.RetryInfo` detail (a protobuf duration), None if absent."""
    for detail in details:
        if isinstance(detail, dict) and detail.get("@type") == _RETRY_INFO:
            value = detail.get("retryDelay")
            if isinstance(value, str) and value.endswith("s"):
                try:
                    seconds = float(value[:-1])
                except ValueError:
                    return None
                return seconds if seconds >= 0 and math.isfinite(seconds) else None
    return None


def _classify(status: int, error: WireError, retry_after: float | None) -> ProviderError:
    if _reason(error.details) == "API_KEY_INVALID":  # a 400 that is the gateway's fault
        return ProviderError(
            f"the upstream refused the gateway's credentials (HTTP {status}): {error.message}",
            upstream_status=status,
            retry_after=retry_after,
        )
    if error.status == "DEADLINE_EXCEEDED":
        return UpstreamTimeout(
            f"the upstream ran out of time (HTTP {status}): {error.message}",
            upstream_status=status,
            retry_after=retry_after,
        )
    return error_for_status(status, error.message, retry_after)


def _reason(details: list[object]) -> str | None:
    for detail in details:
        if isinstance(detail, dict) and detail.get("@type") == _ERROR_INFO:
            reason = detail.get("reason")
            return reason if isinstance(reason, str) else None
    return None


def _error_from_body(body: bytes) -> WireError | None:
    try:
        decoded = _decode_error(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if isinstance(decoded, list):
        if not decoded:
            return None
        decoded = decoded[0]
    error = decoded.error
    return error if error is not None and (error.message or error.status) else None
