"""Image dimensions from the header agree with Pillow's for every format and variant the
gateway accepts, and a header that is cut short or broken gives None, never an error."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from gateway.artifacts.image_size import image_size

_MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_VARIANTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "png": ("PNG", "RGB", {}),
    "png rgba": ("PNG", "RGBA", {}),
    "png grey": ("PNG", "L", {}),
    "jpeg": ("JPEG", "RGB", {}),
    "jpeg progressive": ("JPEG", "RGB", {"progressive": True}),
    "jpeg grey": ("JPEG", "L", {}),
    "jpeg cmyk": ("JPEG", "CMYK", {}),
    "jpeg long exif": ("JPEG", "RGB", {"exif": b"Exif\x00\x00" + b"\x00" * 60_000}),
    "gif": ("GIF", "P", {}),
    "webp": ("WEBP", "RGB", {}),
    "webp lossless": ("WEBP", "RGBA", {"lossless": True}),
    "webp extended": ("WEBP", "RGB", {"exif": b"Exif\x00\x00MM"}),  # VP8X
}


def _encoded(fmt: str, mode: str, size: tuple[int, int], options: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size).save(buffer, format=fmt, **options)
    return buffer.getvalue()


@settings(max_examples=40, deadline=None)
@given(
    variant=st.sampled_from(sorted(_VARIANTS)),
    width=st.integers(1, 700),
    height=st.integers(1, 700),
)
def test_the_header_gives_the_size_pillow_decodes(variant: str, width: int, height: int) -> None:
    fmt, mode, options = _VARIANTS[variant]
    data = _encoded(fmt, mode, (width, height), options)
    with Image.open(io.BytesIO(data)) as decoded:
        assert image_size(data, _MIME[fmt]) == decoded.size


def test_an_animated_webp_gives_its_canvas() -> None:
    frames = [Image.new("RGB", (320, 200), (i, 0, 0)) for i in range(3)]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="WEBP", save_all=True, append_images=frames[1:])
    assert image_size(buffer.getvalue(), "image/webp") == (320, 200)


def test_a_gif_frame_past_its_screen_counts() -> None:
    data = bytearray(_encoded("GIF", "P", (10, 10), {}))
    descriptor = data.index(b"\x2c\x00\x00\x00\x00\x0a\x00\x0a\x00")
    data[descriptor + 1 : descriptor + 5] = (5000).to_bytes(2, "little") * 2  # left, top
    assert image_size(bytes(data), "image/gif") == (5010, 5010)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_a_header_cut_short_gives_none(fmt: str) -> None:
    data = _encoded(fmt, "RGB" if fmt != "GIF" else "P", (64, 48), {})
    for cut in range(0, 20):
        assert image_size(data[:cut], _MIME[fmt]) is None


@pytest.mark.parametrize(
    ("mime", "data"),
    [
        ("image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40),
        ("image/jpeg", b"\xff\xd8\xff\xda" + b"\x00" * 40),
        ("image/jpeg", b"\xff\xd8\x00" * 20),
        ("image/gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"),
        ("image/webp", b"RIFF\x00\x00\x00\x00WEBPVP8 " + b"\x00" * 30),
        ("audio/wav", b"RIFF\x00\x00\x00\x00WAVE" + b"\x00" * 40),
    ],
)
def test_a_broken_header_gives_none(mime: str, data: bytes) -> None:
    assert image_size(data, mime) is None


_HEADS = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8",
    "image/gif": b"GIF89a",
    "image/webp": b"RIFF\x00\x00\x00\x00WEBP",
}


@settings(max_examples=300, deadline=None)
@given(mime=st.sampled_from(sorted(_HEADS)), tail=st.binary(max_size=200))
def test_any_bytes_give_a_size_or_none_and_never_raise(mime: str, tail: bytes) -> None:
    size = image_size(_HEADS[mime] + tail, mime)
    assert size is None or all(isinstance(side, int) and side >= 1 for side in size)
