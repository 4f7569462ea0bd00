"""Small documents and image headers for tests of what the hold counts: real PDFs of a given
number of pages, and images that are only a header (what the gateway and the fakes read; no
pixels, so any size costs a few bytes)."""

from __future__ import annotations

import base64
import struct
import zlib

__all__ = ["ONE_PAGE_PDF", "jpeg_header", "pdf_base64", "png_header"]


def pdf_base64(pages: int) -> str:
    """A PDF of `pages` empty pages, base64: its page tree written out, uncompressed."""
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages))
    objects = [
        b"<</Type/Catalog/Pages 2 0 R>>",
        f"<</Type/Pages/Kids[{kids}]/Count {pages}>>".encode(),
        *(b"<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]>>" for _ in range(pages)),
    ]
    out = b"%PDF-1.4\n"
    for number, body in enumerate(objects, 1):
        out += f"{number} 0 obj".encode() + body + b"endobj\n"
    out += b"trailer<</Root 1 0 R>>\n%%EOF\n"
    return base64.b64encode(out).decode()


ONE_PAGE_PDF = pdf_base64(1)


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature, IHDR (of `width` x `height`) and IEND."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def jpeg_header(width: int, height: int) -> bytes:
    """A JPEG's start, an APP0 segment, and a baseline frame header of `width` x `height`."""
    app0 = b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = struct.pack(">BHHB", 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return (
        b"\xff\xd8"
        + b"\xff\xe0"
        + struct.pack(">H", len(app0) + 2)
        + app0
        + b"\xff\xc0"
        + struct.pack(">H", len(sof) + 2)
        + sof
        + b"\xff\xd9"
    )
