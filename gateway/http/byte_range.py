"""The `Range` request header (RFC 9110, section 14): the one byte range a GET asks for.

Only single ranges are served (`bytes=a-b`, `bytes=a-`, `bytes=-n`), which is what media players
and resumed downloads send. Anything else (several ranges, another unit, a malformed or invalid
value) is ignored and the whole content is sent, as the RFC lets a server do; a range that
starts past the end is 416 with `Content-Range: bytes */<size>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.errors import RangeNotSatisfiable

__all__ = ["ByteRange", "requested_range"]

_SINGLE = re.compile(r"bytes=([0-9]{0,19})-([0-9]{0,19})", re.IGNORECASE)
"""One range-spec; at most 19 digits (a larger number is no real offset: ignored as malformed)."""


@dataclass(frozen=True, slots=True)
class ByteRange:
    start: int
    stop: int
    """Exclusive."""

    @property
    def length(self) -> int:
        return self.stop - self.start

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.stop - 1}/{size}"


def requested_range(header: str | None, size: int) -> ByteRange | None:
    """The range of `size` bytes the `Range` header asks for; None to send them all;
    `RangeNotSatisfiable` when it asks for none of them."""
    if header is None:
        return None
    match = _SINGLE.fullmatch(header.strip())
    if match is None:
        return None
    first, last = match.groups()
    if not first:
        if not last:
            return None  # "bytes=-"
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable(size)
        return ByteRange(max(0, size - suffix), size)
    start = int(first)
    if last and int(last) < start:
        return None  # invalid: ignored
    if start >= size:
        raise RangeNotSatisfiable(size)
    stop = min(int(last) + 1, size) if last else size
    return ByteRange(start, stop)
