"""Magic-byte sniffing for every accepted type, and what it must not mistake for one."""

from __future__ import annotations

import pytest

from gateway.artifacts.sniff import AUDIO_TYPES, IMAGE_TYPES, extension_for, sniff
from tests.artifacts.media import GIF, JPEG, MP3, PNG, WAV


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (b"GIF87a\x01\x00", "image/gif"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp"),
        (WAV, "audio/wav"),
        (MP3, "audio/mpeg"),
        (b"\xff\xfb\x90\x64\x00\x00", "audio/mpeg"),  # MPEG-1 layer III frame, 128 kbit/s
        (b"\xff\xf3\x48\xc4\x00\x00", "audio/mpeg"),  # MPEG-2 layer III
        (b"fLaC\x00\x00\x00\x22", "audio/flac"),
        (b"OggS\x00\x02\x00\x00", "audio/ogg"),
        (b"\x00\x00\x00\x20ftypM4A \x00\x00\x02\x00M4A isommp42", "audio/mp4"),
        (b"\x00\x00\x00\x1cftypisom\x00\x00\x02\x00isomM4A mp41", "audio/mp4"),  # listed brand
    ],
)
def test_known_types(head: bytes, mime: str) -> None:
    assert sniff(head) == mime
    assert mime in IMAGE_TYPES | AUDIO_TYPES


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"<html><body>",
        b"%PDF-1.7",
        b"RIFF\x10\x00\x00\x00AVI LIST",  # RIFF, but video
        b"RIFF",  # too short to tell
        b"\xff\xf1\x50\x80\x00",  # ADTS AAC: sync bits but layer 00
        b"\xff\xfb\xf0\x00",  # bitrate index 1111 is invalid
        b"\xff\xeb\x90\x00",  # MPEG version 01 is reserved
        b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isommp42",  # MP4 video
        b"\x00\x00\x00\x14ftypqt  \x00\x00\x00\x00qt  ",
        b"\x89PNG\r\n",  # truncated signature
    ],
)
def test_unknown_or_lookalike_bytes(head: bytes) -> None:
    assert sniff(head) is None


def test_extensions() -> None:
    expected = {
        "image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif",
        "audio/wav": "wav", "audio/mpeg": "mp3", "audio/flac": "flac", "audio/ogg": "ogg",
        "audio/mp4": "m4a",
    }  # fmt: skip
    assert {mime: extension_for(mime) for mime in IMAGE_TYPES | AUDIO_TYPES} == expected
    assert extension_for("IMAGE/PNG; charset=x") == "png"
    assert extension_for("application/zip") == "bin"
