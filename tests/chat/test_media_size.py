"""What the hold reads of a medium without decoding it: an image's size from the header real
encoders write, a PDF's pages wherever its objects are; and what it refuses to guess."""

from __future__ import annotations

import base64
import io
import zlib

import pytest
from PIL import Image

from gateway.chat.media_size import PdfUncountable, image_size, pdf_pages
from tests.support.documents import pdf_base64


def _encoded(image: Image.Image, fmt: str, **options: object) -> str:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return base64.b64encode(out.getvalue()).decode()


@pytest.mark.parametrize(
    ("fmt", "options"),
    [
        ("PNG", {}),
        ("GIF", {}),
        ("WEBP", {}),
        ("WEBP", {"lossless": True}),
        ("BMP", {}),
        ("JPEG", {}),
        ("JPEG", {"progressive": True, "exif": b"Exif\x00\x00" + b"x" * 60_000}),
    ],
)
def test_the_size_is_read_from_the_header_each_encoder_writes(
    fmt: str, options: dict[str, object]
) -> None:
    image = Image.new("RGB" if fmt != "WEBP" else "RGBA", (1234, 567))
    assert image_size(_encoded(image, fmt, **options)) == (1234, 567)


def test_a_size_is_read_from_where_the_payload_begins_in_a_data_uri() -> None:
    uri = "data:image/png;base64," + _encoded(Image.new("RGB", (9, 7)), "PNG")
    assert image_size(uri, len("data:image/png;base64,")) == (9, 7)


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "not base64 at all!",
        " " + _encoded(Image.new("RGB", (9, 7)), "PNG"),  # whitespace: not clean base64
        base64.b64encode(b"RIFF\x00\x00\x00\x00WEBPVP8Z" + bytes(20)).decode(),
        base64.b64encode(b"\xff\xd8\xff\xda" + bytes(40)).decode(),  # a scan before any frame
    ],
)
def test_what_is_not_a_known_clean_header_gives_no_size(payload: str) -> None:
    assert image_size(payload) is None


def test_pages_are_counted_in_a_pdf_written_out() -> None:
    assert pdf_pages(pdf_base64(7)) == 7
    images = [Image.new("RGB", (10, 10)) for _ in range(4)]
    out = io.BytesIO()
    images[0].save(out, "PDF", save_all=True, append_images=images[1:])
    assert pdf_pages(base64.b64encode(out.getvalue()).decode()) == 4


def test_pages_kept_in_compressed_object_streams_are_counted() -> None:
    objects = zlib.compress(b"1 0 3 40 " + b"<</Type/Page>> " * 3 + b"<</Type /P#61ge>>")
    pdf = (
        b"%PDF-1.5\n5 0 obj<</Type/ObjStm/N 4/First 9/Filter/FlateDecode/Length "
        + str(len(objects)).encode()
        + b">>stream\n"
        + objects
        + b"\nendstream endobj\n%%EOF"
    )
    assert pdf_pages(base64.b64encode(pdf).decode()) == 4


@pytest.mark.parametrize(
    ("pdf", "reason"),
    [
        (b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\n%%EOF", "no page"),
        (b"%PDF-1.4\n1 0 obj<</Type/Page>>endobj trailer<</Encrypt 2 0 R>>", "encrypted"),
        (b"%PDF-1.5\n1 0 obj<</Type/ObjStm>>stream\nnot deflate\nendstream", "does not inflate"),
    ],
)
def test_a_pdf_whose_pages_cannot_be_counted_is_refused(pdf: bytes, reason: str) -> None:
    with pytest.raises(PdfUncountable, match=reason):
        pdf_pages(base64.b64encode(pdf).decode())


def test_an_object_stream_that_inflates_past_the_limit_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("gateway.chat.media_size.PDF_INFLATE_LIMIT", 1000)
    objects = zlib.compress(b"<</Type/Page>>" + bytes(5000))
    pdf = b"%PDF-1.5\n1 0 obj<</Type/ObjStm>>stream\n" + objects + b"\nendstream"
    with pytest.raises(PdfUncountable, match="inflates beyond"):
        pdf_pages(base64.b64encode(pdf).decode())
