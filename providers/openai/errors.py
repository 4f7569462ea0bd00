"""Translate what can go wrong talking to an OpenAI-compatible upstream into `providers.errors`.

Two boundaries, both used as `raise ... from exc` so the cause stays in the traceback:

    status_error(status, body)   an HTTP answer other than 2xx
        400 404 413 422          UpstreamRejectedRequest, with the upstream's own message
        401 403                  ProviderError: the gateway's credentials are wrong
        408 429 503 529          UpstreamUnavailable
        other                    ProviderError (500, 502, 504, any other status)
    transport_error(exc)         aiohttp / asyncio exceptions
        any TimeoutError         UpstreamTimeout (connect, total, or per-read on a stream)
        cannot connect           UpstreamUnavailable (refused, DNS, unreachable)
        other                    ProviderError (disconnects, broken payloads, bad TLS)
"""

from __future__ import annotations

from typing import Any

import aiohttp
import msgspec

from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)

__all__ = ["TRANSPORT_ERRORS", "error_event", "status_error", "transport_error"]

# What a request or a read may raise that is the transport's fault (CancelledError is not).
TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)

_REJECTED = frozenset({400, 404, 413, 422})
_UNAVAILABLE = frozenset({408, 429, 503, 529})
_MAX_MESSAGE = 500


def status_error(status: int, body: bytes) -> ProviderError:
    """The error for a non-2xx answer; the message is the upstream's when it gave one."""
    message = _message_from_body(body)
    if status in _REJECTED:
        return UpstreamRejectedRequest(
            message or f"the upstream rejected the request (HTTP {status})",
            upstream_status=status,
        )
    if status in (401, 403):
        return ProviderError(
            f"the upstream refused the gateway's credentials (HTTP {status}): {message}",
            upstream_status=status,
        )
    cls = UpstreamUnavailable if status in _UNAVAILABLE else ProviderError
    return cls(f"upstream answered HTTP {status}: {message}", upstream_status=status)


def error_event(payload: dict[str, Any]) -> ProviderError:
    """An `{"error": {...}}` object sent inside a 200 stream."""
    message = _message_from_error(payload.get("error"))
    return ProviderError(f"upstream reported an error mid-stream: {message or 'no message'}")


def transport_error(exc: BaseException) -> ProviderError:
    """The most specific provider error for an aiohttp/asyncio exception."""
    if isinstance(exc, TimeoutError):
        return UpstreamTimeout(f"upstream did not answer in time ({type(exc).__name__})")
    if isinstance(exc, aiohttp.ClientSSLError):
        return ProviderError(f"TLS with the upstream failed: {exc}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamUnavailable(f"cannot connect to the upstream: {exc}")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ProviderError(f"the upstream broke off its answer: {exc}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return ProviderError("the upstream closed the connection before answering")
    return ProviderError(f"upstream request failed: {type(exc).__name__}: {exc}")


def _message_from_body(body: bytes) -> str:
    """`error.message` of an OpenAI error body, or a common variant, or the raw text."""
    if not body:
        return ""
    try:
        decoded: object = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body[:_MAX_MESSAGE].decode("utf-8", "replace").strip()
    if isinstance(decoded, dict):
        for key in ("error", "detail", "message"):
            if key in decoded:
                found = _message_from_error(decoded[key])
                if found:
                    return found
    return body[:_MAX_MESSAGE].decode("utf-8", "replace").strip()


def _message_from_error(error: object) -> str:
    if isinstance(error, str):
        return error[:_MAX_MESSAGE]
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str):
            return message[:_MAX_MESSAGE]
    return ""
