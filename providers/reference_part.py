"""A reference file as one part of a multipart upload, streamed from the gateway's store.

    form.add_field("image[]", ReferencePart(reference, mime), filename=..., content_type=mime)

The part announces the reference's exact size (so the request keeps a Content-Length) and
reads the bytes only while aiohttp writes the request, one chunk (a few hundred KiB) at a time,
waiting whenever the socket's buffer is full: an upload of many large references holds about
one chunk, not the files. Each write is a fresh read, so a body sent again reads again.

aiohttp reports a failing source only as a broken connection (`ClientConnectionError`); the
part keeps the source's own error in `error`, and `source_error` finds it, so the adapter can
raise that instead of blaming the upstream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import aiohttp
from aiohttp.abc import AbstractStreamWriter

from providers.base import MediaInput

__all__ = ["ReferencePart", "source_error"]


class ReferencePart(aiohttp.Payload):
    """`reference` as a multipart part of type `mime` (see the module docstring)."""

    _autoclose = True  # holds nothing until written

    def __init__(self, reference: MediaInput, mime: str) -> None:
        super().__init__(reference, content_type=mime)
        self._reference = reference
        self._size = reference.size_bytes
        self.error: Exception | None = None

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        raise TypeError("a streamed reference has no text form")

    async def write(self, writer: AbstractStreamWriter) -> None:
        try:  # closed at once if the write stops (a cancel): the store's file or GET with it
            async with contextlib.aclosing(self._reference.chunks()) as chunks:
                async for chunk in chunks:
                    await writer.write(chunk)  # waits while the socket's buffer is full
        except Exception as exc:
            self.error = exc
            raise

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        await self.write(writer)  # `size` is exact: a length asked for is all of it


def source_error(parts: Iterable[ReferencePart]) -> Exception | None:
    """The error a part's source raised while the request was written, if any did."""
    return next((part.error for part in parts if part.error is not None), None)
