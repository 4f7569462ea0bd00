"""Leading bytes of each accepted type, padded into small sample files."""

from __future__ import annotations

import struct
import zlib

__all__ = ["GIF", "JPEG", "MP3", "PNG", "WAV", "png_header", "sample"]

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
GIF = b"GIF89a\x01\x00\x01\x00"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "
MP3 = b"ID3\x04\x00\x00\x00\x00\x00\x00"


def sample(head: bytes, size: int = 4096) -> bytes:
    """`head` followed by a deterministic, non-repeating-looking filler up to `size` bytes."""
    filler = bytes((i * 131 + 7) % 251 for i in range(max(size - len(head), 0)))
    return head + filler


def png_header(width: int, height: int) -> bytes:
    """A PNG signature and IHDR chunk (8-bit RGB) announcing `width` x `height`."""
    fields = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + fields
    return (
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    )
