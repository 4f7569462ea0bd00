"""An upstream's multipart uploads: `Form`, whose files may be references streamed from the
gateway's store while the request is written (`providers.reference_part`), and the aiohttp
session that sends them. Everything else goes through `providers.http1`; this path is taken
only by media edits and uploads, where the bytes sent, not the client's CPU, set the cost.

    form = Form()
    form.add_field("prompt", "a cat")
    form.add_file("image", ReferencePart(reference, mime), filename="a.png", content_type=mime)
    await upstream.request("POST", url, form, uploads=parts)   # its content type set from it
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from providers.errors import ProviderError
from providers.http import merged_headers
from providers.http1 import Timeouts
from providers.options import HttpOptions

__all__ = ["Form", "new_session", "read_answer", "upload_timeout"]


class Form:
    """A multipart/form-data body: text fields and files (bytes, or a `ReferencePart` read
    while it is sent). Sent once: a streamed body cannot be sent again."""

    __slots__ = ("_form",)

    def __init__(self) -> None:
        self._form = aiohttp.FormData()

    def add_field(self, name: str, value: str) -> None:
        self._form.add_field(name, value)

    def add_file(
        self, name: str, data: bytes | aiohttp.Payload, *, filename: str, content_type: str
    ) -> None:
        """A file part; `data` is its bytes or a `providers.reference_part.ReferencePart`."""
        self._form.add_field(name, data, filename=filename, content_type=content_type)

    def payload(self) -> aiohttp.Payload:
        """The body as aiohttp writes it (its `content_type` carries the boundary)."""
        return self._form()


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
