"""Image dimensions read from a file's first bytes, without decoding a pixel.

A few hundred kilobytes can hold an image of a billion pixels (a PNG of one colour compresses
a thousandfold), and whoever decodes it allocates every pixel: the byte cap bounds nothing
there. So a reference image's width and height are read from its header and checked against
a pixel cap before anything decodes it. The parsers below read only the header fields:

- PNG: IHDR, the first chunk.
- JPEG: the first start-of-frame marker, walking the segments before it (EXIF, ICC, ...).
- GIF: the logical screen and the first frame's extent (a frame may reach past the screen,
  and decoders then grow the canvas); later frames are not decoded by the gateway's side.
- WebP: the VP8X canvas (animations and extended files), else the VP8L or VP8 frame header.

`IMAGE_HEADER_BYTES` is how much of a file is read to find them: a JPEG whose segments before
its frame header are longer than that is refused as unreadable.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["DEFAULT_MAX_IMAGE_PIXELS", "IMAGE_HEADER_BYTES", "image_size"]

IMAGE_HEADER_BYTES = 1024 * 1024
DEFAULT_MAX_IMAGE_PIXELS = 40_000_000
"""40 megapixels (e.g. 8000 x 5000): more than any upstream keeps of a reference image."""

_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xD8)})


def image_size(head: bytes, mime_type: str) -> tuple[int, int] | None:
    """(width, height) from the first bytes of an image of `mime_type` (as sniffed); None
    when they do not hold a readable header (or announce an empty image)."""
    parse = _PARSERS.get(mime_type)
    if parse is None:
        return None
    try:
        size = parse(head)
    except IndexError:  # the header ends early
        return None
    return size if size is not None and min(size) > 0 else None


def _u16be(data: bytes, at: int) -> int:
    return data[at] << 8 | data[at + 1]


def _u16le(data: bytes, at: int) -> int:
    return data[at] | data[at + 1] << 8


def _u24le(data: bytes, at: int) -> int:
    return data[at] | data[at + 1] << 8 | data[at + 2] << 16


def _png(head: bytes) -> tuple[int, int] | None:
    if len(head) < 24 or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _jpeg(head: bytes) -> tuple[int, int] | None:
    at = 2  # after SOI
    while at + 4 <= len(head):
        if head[at] != 0xFF:
            return None
        marker = head[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _STANDALONE_MARKERS:
            at += 2
            continue
        if marker in _SOF_MARKERS:
            if at + 9 > len(head):
                return None
            return _u16be(head, at + 7), _u16be(head, at + 5)
        if marker in (0xD9, 0xDA):  # end of image, or scan data before any frame header
            return None
        at += 2 + _u16be(head, at + 2)
    return None


def _gif(head: bytes) -> tuple[int, int] | None:
    width, height = _u16le(head, 6), _u16le(head, 8)
    flags = head[10]
    at = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    while at < len(head):
        block = head[at]
        if block == 0x2C:  # the first image descriptor
            left, top = _u16le(head, at + 1), _u16le(head, at + 3)
            frame_width, frame_height = _u16le(head, at + 5), _u16le(head, at + 7)
            return max(width, left + frame_width), max(height, top + frame_height)
        if block != 0x21:  # trailer or junk: no frame
            return None
        at += 2  # extension introducer and label, then sub-blocks up to an empty one
        while head[at]:
            at += head[at] + 1
        at += 1
    return None


def _webp(head: bytes) -> tuple[int, int] | None:
    if len(head) < 30 or head[:4] != b"RIFF" or head[8:12] != b"WEBP":
        return None
    chunk = head[12:16]
    if chunk == b"VP8X":
        return _u24le(head, 24) + 1, _u24le(head, 27) + 1
    if chunk == b"VP8L":
        if head[20] != 0x2F:
            return None
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1
    if chunk == b"VP8 ":
        if head[23:26] != b"\x9d\x01\x2a":
            return None
        return _u16le(head, 26) & 0x3FFF, _u16le(head, 28) & 0x3FFF
    return None


_PARSERS: dict[str, Callable[[bytes], tuple[int, int] | None]] = {
    "image/png": _png,
    "image/jpeg": _jpeg,
    "image/gif": _gif,
    "image/webp": _webp,
}
