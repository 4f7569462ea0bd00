"""Data URI reference inputs: cap before decoding, strict base64, sniffed type."""

from __future__ import annotations

import base64

import pytest

from gateway.artifacts.data_uri import decode_data_uri
from gateway.artifacts.sniff import IMAGE_TYPES
from gateway.errors import ValidationFailed
from tests.artifacts.media import JPEG, PNG, sample

FIELD = "image.data_uri"


def _uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _refusal(value: str, max_bytes: int = 10_000) -> str:
    with pytest.raises(ValidationFailed) as caught:
        decode_data_uri(value, field=FIELD, allowed_types=IMAGE_TYPES, max_bytes=max_bytes)
    error = caught.value
    assert error.status_code == 422
    assert [d.field for d in error.details] == [FIELD]
    return error.details[0].message


def test_decodes_and_reports_the_sniffed_type() -> None:
    png = sample(PNG, 1000)
    decoded = decode_data_uri(_uri(png), field=FIELD, allowed_types=IMAGE_TYPES, max_bytes=1000)
    assert (decoded.mime_type, decoded.data) == ("image/png", png)
    # The declared type is only a claim: JPEG bytes labelled PNG are JPEG.
    jpeg = sample(JPEG, 300)
    relabelled = decode_data_uri(
        _uri(jpeg, "image/png"), field=FIELD, allowed_types=IMAGE_TYPES, max_bytes=1000
    )
    assert relabelled.mime_type == "image/jpeg"
    upper = decode_data_uri(
        "DATA:image/png;charset=x;BASE64," + base64.b64encode(png).decode(),
        field=FIELD,
        allowed_types=IMAGE_TYPES,
        max_bytes=1000,
    )
    assert upper.data == png


def test_size_is_refused_from_the_encoded_length_before_decoding() -> None:
    # Not valid base64 at all: only a length check that runs first can give "larger".
    assert "larger than the limit of 300 bytes" in _refusal(
        "data:image/png;base64," + "!" * 401, 300
    )
    assert "larger than" in _refusal(_uri(sample(PNG, 301)), 300)
    assert "larger than" in _refusal(_uri(sample(PNG, 299)), 298)  # exact decoded check too


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("https://example.com/a.png", "must be a data URI"),
        ("data:image/png," + "x" * 20, "base64"),
        ("data:image/png;base64", "must be a data URI"),
        ("data:image/png;base64,", "is empty"),
        ("data:image/png;base64,iVBO Rw0K", "not valid base64"),
        ("data:image/png;base64,iVBORw0K\n", "not valid base64"),
        ("data:image/png;base64,iVBORw0", "not valid base64"),  # bad padding
        ("data:image/png;base64,iVBORw==0K", "not valid base64"),  # data after padding
        ("data:image/png;base64,iVBORw0K-_==", "not valid base64"),  # urlsafe alphabet
        ("data:image/png;base64,iVBORw0Ké", "not valid base64"),
        (_uri(b"<html>not an image</html>"), "must be one of: image/gif"),
        (_uri(b"RIFF\x24\x00\x00\x00WAVEfmt "), "must be one of"),  # audio, not allowed here
        ("data:" + "a" * 300 + ";base64,AAAA", "must be a data URI"),  # header too long
    ],
)
def test_refusals(value: str, words: str) -> None:
    assert words in _refusal(value)
