"""One table from an upstream's HTTP status to the provider error it means, for every adapter.

    error_for_status(status, message, retry_after)
        400 404 413 422          UpstreamRejectedRequest, with the upstream's own message
        401 403                  ProviderError: the gateway's credentials are wrong
        408 429 503 529          UpstreamUnavailable
        other                    ProviderError (500, 502, 504, any other status)

`error_for_response` is the same with the message read from the error body (`error.message`
as OpenAI, Anthropic and Gemini send it, or `detail`/`message`, or the raw text) and
`Retry-After` read from the headers. Only error paths call into this module.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime

import msgspec

from providers.errors import ProviderError, UpstreamRejectedRequest, UpstreamUnavailable

__all__ = [
    "error_for_response",
    "error_for_status",
    "message_from_body",
    "message_from_error",
    "retry_after_seconds",
]

_REJECTED = frozenset({400, 404, 413, 422})
_CREDENTIALS = frozenset({401, 403})
_UNAVAILABLE = frozenset({408, 429, 503, 529})
_MAX_MESSAGE = 500


def error_for_status(status: int, message: str, retry_after: float | None = None) -> ProviderError:
    """The error for a non-2xx answer; `message` is the upstream's own ("" when it gave none)."""
    if status in _REJECTED:
        return UpstreamRejectedRequest(
            message or f"the upstream rejected the request (HTTP {status})",
            upstream_status=status,
            retry_after=retry_after,
        )
    if status in _CREDENTIALS:
        return ProviderError(
            f"the upstream refused the gateway's credentials (HTTP {status}): {message}",
            upstream_status=status,
            retry_after=retry_after,
        )
    cls = UpstreamUnavailable if status in _UNAVAILABLE else ProviderError
    return cls(
        f"upstream answered HTTP {status}: {message}",
        upstream_status=status,
        retry_after=retry_after,
    )


def error_for_response(status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
    """`error_for_status` for an answer as read: its body and (case-insensitive) headers."""
    retry_after = retry_after_seconds(headers.get("Retry-After"))
    return error_for_status(status, message_from_body(body), retry_after)


def message_from_body(body: bytes) -> str:
    """The message of an error body (JSON with `error`, `detail` or `message`), else its text."""
    if not body:
        return ""
    try:
        decoded: object = msgspec.json.decode(body)
    except msgspec.DecodeError:
        decoded = None
    if isinstance(decoded, dict):
        for key in ("error", "detail", "message"):
            if key in decoded:
                found = message_from_error(decoded[key])
                if found:
                    return found
    return body[:_MAX_MESSAGE].decode("utf-8", "replace").strip()


def message_from_error(error: object) -> str:
    """The message of an error value: a string, or an object with a string `message`."""
    if isinstance(error, str):
        return error[:_MAX_MESSAGE]
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str):
            return message[:_MAX_MESSAGE]
    return ""


def retry_after_seconds(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a `Retry-After` value (seconds or an HTTP date); None if unusable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # "-0000": the zone is unknown; HTTP dates are GMT
            when = when.replace(tzinfo=UTC)
        return max(0.0, when.timestamp() - now())
    return seconds if seconds >= 0 and math.isfinite(seconds) else None
