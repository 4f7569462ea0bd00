"""Streamed references for adapter tests: `MediaInput`s whose bytes are made as they are read.

A `ReferenceSource` hands out references of any size without holding them: each read yields
`head`, then a fixed 64 KiB block (different per reference) repeated to the size, in chunks
of at most `chunk_bytes`. It counts the reads started and the most that were under way at once,
and `digest(...)` gives the SHA-256 a reference's bytes must have, computed the same streamed way.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator

from providers.base import MediaInput

__all__ = ["ReferenceSource", "SourceBroke"]

_BLOCK = 64 * 1024


class ReferenceSource:
    def __init__(self, *, chunk_bytes: int = 256 * 1024) -> None:
        self.chunk_bytes = chunk_bytes
        self.opened = 0  # reads started
        self.reading = 0  # reads under way now
        self.most_reading = 0
        self.fail_after: int | None = None  # raise `SourceBroke` after this many bytes

    def reference(self, number: int, size: int, mime_type: str, head: bytes = b"") -> MediaInput:
        async def open_() -> AsyncIterator[bytes]:
            self.opened += 1
            return self._read(number, size, head)

        return MediaInput(mime_type=mime_type, size_bytes=size, open=open_)

    def digest(self, number: int, size: int, head: bytes = b"") -> str:
        digest = hashlib.sha256()
        for chunk in self._chunks(number, size, head):
            digest.update(chunk)
        return digest.hexdigest()

    async def _read(self, number: int, size: int, head: bytes) -> AsyncIterator[bytes]:
        self.reading += 1
        self.most_reading = max(self.most_reading, self.reading)
        sent = 0
        try:
            for chunk in self._chunks(number, size, head):
                if self.fail_after is not None and sent + len(chunk) > self.fail_after:
                    raise SourceBroke(f"reference {number} broke after {sent} bytes")
                sent += len(chunk)
                yield chunk
        finally:
            self.reading -= 1

    def _chunks(self, number: int, size: int, head: bytes) -> Iterator[bytes]:
        block = hashlib.shake_256(b"reference %d" % number).digest(_BLOCK)
        position = 0
        while position < size:
            if position < len(head):
                piece = head[position : position + self.chunk_bytes]
            else:
                offset = (position - len(head)) % _BLOCK
                piece = block[offset : offset + self.chunk_bytes]
            piece = piece[: size - position]
            position += len(piece)
            yield piece


class SourceBroke(OSError):
    """The store failed mid-read (an OSError, as a disk or S3 read error would be)."""
