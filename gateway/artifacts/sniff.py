"""Content types from magic bytes, for the media the gateway accepts.

A declared Content-Type (a header, a data URI, a multipart part) is only the client's claim;
what decides whether bytes are an image or audio is their signature here. Types outside these
two sets are refused by callers, so `sniff` returns None for them rather than guessing.
"""

from __future__ import annotations

__all__ = ["AUDIO_TYPES", "IMAGE_TYPES", "extension_for", "sniff"]

IMAGE_TYPES: frozenset[str] = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})
AUDIO_TYPES: frozenset[str] = frozenset(
    {"audio/wav", "audio/mpeg", "audio/flac", "audio/ogg", "audio/mp4"}
)

_EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/webp": "webp",
    "image/gif": "gif",
    "audio/wav": "wav",
    "audio/mpeg": "mp3",
    "audio/flac": "flac",
    "audio/ogg": "ogg",
    "audio/mp4": "m4a",
}
_M4A_BRANDS = (b"M4A ", b"M4B ")


def sniff(head: bytes) -> str | None:
    """The media type the leading bytes announce, or None when it is not one we accept."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and len(head) >= 12:
        form = head[8:12]
        if form == b"WEBP":
            return "image/webp"
        if form == b"WAVE":
            return "audio/wav"
        return None
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if _is_m4a(head):
        return "audio/mp4"
    if head.startswith(b"ID3") or _is_mpeg_frame(head):
        return "audio/mpeg"
    return None


def _is_m4a(head: bytes) -> bool:
    """An ISO media file whose major or a listed compatible brand is M4A/M4B."""
    if len(head) < 12 or head[4:8] != b"ftyp":
        return False
    box_end = min(int.from_bytes(head[0:4], "big"), len(head))
    brands = [head[8:12]] + [head[i : i + 4] for i in range(16, box_end - 3, 4)]
    return any(brand in _M4A_BRANDS for brand in brands)


def _is_mpeg_frame(head: bytes) -> bool:
    """An MPEG audio frame header: 11 sync bits, then no reserved version, layer or rate.

    The reserved-field checks keep ADTS AAC (layer bits 00) and random bytes out.
    """
    if len(head) < 4 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return False
    version = (head[1] >> 3) & 0b11
    layer = (head[1] >> 1) & 0b11
    bitrate = head[2] >> 4
    sample_rate = (head[2] >> 2) & 0b11
    return version != 0b01 and layer != 0b00 and bitrate != 0b1111 and sample_rate != 0b11


def extension_for(mime: str) -> str:
    """The file extension for a type we accept ("png", "wav", ...); "bin" for anything else."""
    return _EXTENSIONS.get(mime.split(";", 1)[0].strip().lower(), "bin")
