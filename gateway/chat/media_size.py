"""What bounds a medium's tokens, read without decoding it: an image's width and height from
its header (PNG, GIF, WebP, JPEG, BMP) in a base64 payload, a PDF's pages from its objects.

Only the few base64 characters that hold a header are decoded (strictly: a payload that is
not clean base64 gives None, and the caller holds the upstream's per-image cap). A PDF is
decoded whole (it is already in the request) and its compressed object streams inflated
within `PDF_INFLATE_LIMIT`, so pages kept in them are counted too.
"""

from __future__ import annotations

import binascii
import re
import zlib
from typing import Literal

__all__ = ["PDF_INFLATE_LIMIT", "PdfUncountable", "image_size", "pdf_pages"]

PDF_INFLATE_LIMIT = 32 * 1024 * 1024
_JPEG_SCAN_LIMIT = 1024 * 1024
_JPEG_SEGMENTS = 256
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_PAGE = re.compile(rb"/Type\s*/(?:P|#50)(?:a|#61)(?:g|#67)(?:e|#65)(?![A-Za-z0-9#])", re.IGNORECASE)
_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm")
_STREAM = re.compile(rb"stream\r?\n")


class PdfUncountable(ValueError):
    """A PDF whose pages cannot be counted without rendering it (encrypted, an object
    stream that does not inflate, or no page found)."""


def _chunk(payload: str, start: int, offset: int, length: int) -> bytes:
    """`length` bytes at `offset` of the base64 text that begins at `payload[start]`."""
    first = offset // 3 * 4
    last = -(-(offset + length) // 3) * 4
    text = payload[start + first : start + last]
    if len(text) % 4:
        raise ValueError("short")
    data = binascii.a2b_base64(text, strict_mode=True)
    skip = offset - first // 4 * 3
    piece = data[skip : skip + length]
    if len(piece) != length:
        raise ValueError("short")
    return piece


def image_size(payload: str, start: int = 0) -> tuple[int, int] | None:
    """(width, height) of the image whose base64 begins at `payload[start]`; None when its
    header is not one of the known formats or not clean base64."""
    try:
        head = _chunk(payload, start, 0, 30)
    except (ValueError, binascii.Error):
        return None
    try:
        if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR":
            return _positive(int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big"))
        if head[:6] in (b"GIF87a", b"GIF89a"):
            return _positive(
                int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
            )
        if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
            return _webp(head)
        if head[:2] == b"BM":
            width = int.from_bytes(head[18:22], "little", signed=True)
            height = int.from_bytes(head[22:26], "little", signed=True)
            return _positive(abs(width), abs(height))
        if head[:2] == b"\xff\xd8":
            return _jpeg(payload, start)
    except (ValueError, binascii.Error):
        return None
    return None


def _int(data: bytes, at: int, size: int, order: Literal["big", "little"]) -> int:
    return int.from_bytes(data[at : at + size], order)


def _positive(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None


def _webp(head: bytes) -> tuple[int, int] | None:
    kind = head[12:16]
    if kind == b"VP8 ":
        width = int.from_bytes(head[26:28], "little") & 0x3FFF
        height = int.from_bytes(head[28:30], "little") & 0x3FFF
        return _positive(width, height)
    if kind == b"VP8L":
        bits = int.from_bytes(head[21:25], "little")
        return _positive((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if kind == b"VP8X":
        width = int.from_bytes(head[24:27], "little") + 1
        height = int.from_bytes(head[27:30], "little") + 1
        return _positive(width, height)
    return None


def _jpeg(payload: str, start: int) -> tuple[int, int] | None:
    """Walks the markers to the first start-of-frame, skipping segments by their length."""
    at = 2
    for _ in range(_JPEG_SEGMENTS):
        if at > _JPEG_SCAN_LIMIT:
            return None
        marker = _chunk(payload, start, at, 2)
        if marker[0] != 0xFF:
            return None
        kind = marker[1]
        if kind == 0xFF:  # fill byte
            at += 1
            continue
        if kind in (0x01, *range(0xD0, 0xD8)):
            at += 2
            continue
        if kind in _SOF:
            frame = _chunk(payload, start, at + 5, 4)
            return _positive(int.from_bytes(frame[2:4], "big"), int.from_bytes(frame[0:2], "big"))
        if kind in (0xD9, 0xDA):  # end of image, or scan data before any frame
            return None
        at += 2 + int.from_bytes(_chunk(payload, start, at + 2, 2), "big")
    return None


def pdf_pages(payload: str, start: int = 0) -> int:
    """The pages of the PDF whose base64 begins at `payload[start]`: its page objects, those
    in compressed object streams included; PdfUncountable when that cannot be known."""
    try:
        data = binascii.a2b_base64(payload[start:], strict_mode=True)
    except (ValueError, binascii.Error) as exc:
        raise PdfUncountable("is not clean base64") from exc
    if b"/Encrypt" in data:
        raise PdfUncountable("is encrypted")
    pages = len(_PAGE.findall(data))
    budget = PDF_INFLATE_LIMIT
    for found in _OBJECT_STREAM.finditer(data):
        opened = _STREAM.search(data, found.end())
        if opened is None:
            raise PdfUncountable("has an object stream without data")
        end = data.find(b"endstream", opened.end())
        raw = data[opened.end() : end if end >= 0 else len(data)]
        inflater = zlib.decompressobj()
        try:
            objects = inflater.decompress(raw, budget + 1)
        except zlib.error as exc:
            raise PdfUncountable("has an object stream that does not inflate") from exc
        budget -= len(objects)
        if budget < 0:
            raise PdfUncountable(f"inflates beyond {PDF_INFLATE_LIMIT} bytes")
        pages += len(_PAGE.findall(objects))
    if not pages:
        raise PdfUncountable("has no page the gateway can count")
    return pages
