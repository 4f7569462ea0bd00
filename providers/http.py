"""The pooled aiohttp session every HTTP adapter opens (through `providers.upstream`, which
makes the calls), and the one translation of what aiohttp/asyncio raise into `providers.errors`.

    transport_error(exc)         for `except TRANSPORT_ERRORS as exc: raise ... from exc`
        any TimeoutError         UpstreamTimeout (connect, total, or per-read on a stream)
        TLS failure              ProviderError (a certificate or setup problem, not transient)
        cannot connect           UpstreamUnavailable (refused, DNS, unreachable)
        broken-off payload       ProviderError
        disconnect, not HTTP     ProviderError (closed before answering, garbage status line)
        other                    ProviderError

A whole answer is read with `read_body(response, max_bytes)`, never `response.read()`: an
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
from providers.options import HttpOptions

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_MEDIA_BYTES",
    "TRANSPORT_ERRORS",
    "new_session",
    "read_body",
    "stream_timeout",
    "transport_error",
]

# What a request or a read may raise that is the transport's fault (CancelledError is not).
TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_MEDIA_BYTES = 512 * 1024 * 1024


async def read_body(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The whole body; ProviderError (the connection closed) once it passes `max_bytes`.
    Transport errors pass through, for the caller's `except TRANSPORT_ERRORS`."""
    length = response.content_length
    if length is not None and length <= max_bytes:
        return await response.read()
    if length is None:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_any():
            size += len(chunk)
            if size > max_bytes:
                break
            chunks.append(chunk)
        else:
            return b"".join(chunks)
    response.close()
    raise ProviderError(f"the upstream's answer is over {max_bytes} bytes")


def new_session(options: HttpOptions, headers: Mapping[str, str]) -> aiohttp.ClientSession:
    """The pooled session (call inside the running loop; the adapter closes it).

    `headers` are the adapter's own (content type, its way of sending the key from
    `options.resolve_api_key`); `options.extra_headers` override them. Keep-alive connections
    up to `max_connections` to any host, `timeout_seconds` in total per call unless a call
    passes `stream_timeout(options)`, and no proxy or netrc taken from the environment.
    """
    merged = CIMultiDict(headers)
    for name, value in options.extra_headers.items():
        merged[name] = value  # replaces the adapter's header of that name, in any case
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=options.max_connections, limit_per_host=0),
        headers=merged,
        timeout=aiohttp.ClientTimeout(
            total=options.timeout_seconds, sock_connect=options.connect_timeout_seconds
        ),
        trust_env=False,
    )


def stream_timeout(options: HttpOptions) -> aiohttp.ClientTimeout:
    """For a streamed answer: no total, each read within `stream_read_timeout_seconds`.

    Build it once per provider and pass it as `timeout=` on the streaming request."""
    return aiohttp.ClientTimeout(
        total=None,
        connect=options.timeout_seconds,
        sock_connect=options.connect_timeout_seconds,
        sock_read=options.stream_read_timeout_seconds,
    )


def transport_error(exc: BaseException) -> ProviderError:
    """The most specific provider error for an aiohttp/asyncio exception (table above)."""
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
    if isinstance(exc, aiohttp.ClientResponseError):  # we never raise_for_status: bad HTTP
        return ProviderError(f"the upstream's answer is not valid HTTP: {exc.message}")
    return ProviderError(f"upstream request failed: {type(exc).__name__}: {exc}")
