"""The aiohttp session that carries an upstream's streamed (multipart) uploads: a body read
from the gateway's store while it is sent (`providers.reference_part`), or a form. Everything
else goes through `providers.http1`; this path is taken only by media edits and uploads, where
the bytes sent, not the client's CPU, set the cost.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from providers.errors import ProviderError
from providers.http import merged_headers
from providers.http1 import Timeouts
from providers.options import HttpOptions

__all__ = ["Upload", "new_session", "read_answer", "upload_timeout"]

Upload = aiohttp.Payload | aiohttp.FormData
"""A body sent as it is read: a multipart form, a reference streamed from the store."""


def new_session(options: HttpOptions, headers: Mapping[str, str]) -> aiohttp.ClientSession:
    """The aiohttp session for streamed (multipart) uploads (call inside the running loop;
    the adapter closes it): `merged_headers`, keep-alive connections up to `max_connections`,
    `timeout_seconds` in total per call, no proxy or netrc taken from the environment."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=options.max_connections, limit_per_host=0),
        headers=merged_headers(options, headers),
        timeout=aiohttp.ClientTimeout(
            total=options.timeout_seconds, sock_connect=options.connect_timeout_seconds
        ),
        trust_env=False,
    )


def upload_timeout(timeouts: Timeouts, connect: float) -> aiohttp.ClientTimeout:
    """`timeouts` as aiohttp reads them, for an upload (`connect`: the options' default)."""
    return aiohttp.ClientTimeout(
        total=timeouts.total,
        sock_connect=connect if timeouts.connect is None else timeouts.connect,
        sock_read=timeouts.read,
    )


async def read_answer(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The whole body; ProviderError (the connection closed) once it passes `max_bytes`."""
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
