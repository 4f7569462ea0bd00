"""What every HTTP adapter's calls share (through `providers.upstream`, which makes them): the
answer's bounded read, the headers and timeouts of its options, and the one translation of
what the transport raises (`providers.http1`, aiohttp for uploads, asyncio) into
`providers.errors`.

    transport_error(exc)         for `except TRANSPORT_ERRORS as exc: raise ... from exc`
        any TimeoutError         UpstreamTimeout (connect, total, or per-read on a stream)
        TLS failure              ProviderError (a certificate or setup problem, not transient)
        cannot connect           UpstreamUnavailable (refused, DNS, unreachable)
        broken-off body          ProviderError
        disconnect, not HTTP     ProviderError (closed before answering, garbage status line)
        other                    ProviderError

A whole answer is read with `read_body(response, max_bytes)`, never all at once: an
upstream that keeps sending (a wrong `base_url`, a broken server) must not make the gateway
hold it all before the total timeout; past the bound the connection is closed and the call
fails (ProviderError). `MAX_ANSWER_BYTES` bounds JSON answers (chat, errors, task APIs),
`MAX_MEDIA_BYTES` answers that carry media (images in base64, downloaded audio).

Adapters catch at the boundary with a plain `try`/`except TRANSPORT_ERRORS` rather than a
context manager: a `try` costs nothing until something is raised, and these calls sit on a path
measured in tens of microseconds.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp
from multidict import CIMultiDict

from providers.errors import ProviderError, UpstreamTimeout, UpstreamUnavailable
from providers.http1 import (
    BadAnswer,
    BrokenBody,
    ConnectFailed,
    Disconnected,
    Response,
    Timeouts,
    TLSFailed,
    TransportError,
)
from providers.options import HttpOptions

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_MEDIA_BYTES",
    "TRANSPORT_ERRORS",
    "call_timeouts",
    "merged_headers",
    "read_body",
    "stream_timeouts",
    "transport_error",
]

# What a request or a read may raise that is the transport's fault (CancelledError is not).
TRANSPORT_ERRORS = (TransportError, aiohttp.ClientError, TimeoutError, OSError)
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_MEDIA_BYTES = 512 * 1024 * 1024


async def read_body(response: Response, max_bytes: int) -> bytes:
    """The whole body; ProviderError (the connection closed) once it passes `max_bytes`.
    Transport errors pass through, for the caller's `except TRANSPORT_ERRORS`."""
    first = await response.read_chunk()
    if not first or response.at_eof():
        if len(first) <= max_bytes:
            return first
    else:
        chunks = [first]
        size = len(first)
        while size <= max_bytes:
            chunk = await response.read_chunk()
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            chunks.append(chunk)
    response.close()
    raise ProviderError(f"the upstream's answer is over {max_bytes} bytes")


def merged_headers(options: HttpOptions, headers: Mapping[str, str]) -> dict[str, str]:
    """The adapter's own `headers` (content type, its way of sending the key from
    `options.resolve_api_key`) with `options.extra_headers` over them, in any case."""
    merged = CIMultiDict(headers)
    for name, value in options.extra_headers.items():
        merged[name] = value  # replaces the adapter's header of that name, in any case
    return dict(merged)


def call_timeouts(options: HttpOptions) -> Timeouts:
    """For a whole answer: `timeout_seconds` from the request to the body's last byte."""
    return Timeouts(total=options.timeout_seconds)


def stream_timeouts(options: HttpOptions) -> Timeouts:
    """For a streamed answer: no total; each read within `stream_read_timeout_seconds`,
    waiting for a free pooled connection within `timeout_seconds`."""
    return Timeouts(pool=options.timeout_seconds, read=options.stream_read_timeout_seconds)


def transport_error(exc: BaseException) -> ProviderError:
    """The most specific provider error for a transport's exception (table above)."""
    if isinstance(exc, TimeoutError):
        return UpstreamTimeout(f"upstream did not answer in time ({type(exc).__name__})")
    if isinstance(exc, TransportError):
        if isinstance(exc, ConnectFailed):
            return UpstreamUnavailable(str(exc))
        if isinstance(exc, TLSFailed):
            return ProviderError(str(exc))
        if isinstance(exc, BrokenBody | BadAnswer | Disconnected):
            return ProviderError(str(exc))
        return ProviderError(f"upstream request failed: {exc}")
    if isinstance(exc, aiohttp.ClientSSLError):
        return ProviderError(f"TLS with the upstream failed: {exc}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamUnavailable(f"cannot connect to the upstream: {exc}")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ProviderError(f"the upstream broke off its answer: {exc}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return ProviderError("the upstream closed the connection before answering")
    if isinstance(exc, aiohttp.ClientResponseError):  # we never raise_for_status: bad HTTP
        return ProviderError(f"the upstream's answer is not valid HTTP: {exc.message}")
    return ProviderError(f"upstream request failed: {type(exc).__name__}: {exc}")
