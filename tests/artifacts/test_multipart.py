"""Streaming multipart uploads, from bodies built by hand and fed in small chunks."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.artifacts.blobs import LocalBlobStore
from gateway.artifacts.multipart import MultipartLimits, Upload, open_upload, sanitize_filename
from gateway.errors import GatewayError, PayloadTooLarge, UnsupportedMediaType, ValidationFailed
from tests.artifacts.conftest import Run
from tests.artifacts.media import PNG, sample

BOUNDARY = "----gatewaytestboundary7MA4YWxk"
CONTENT_TYPE = f"multipart/form-data; boundary={BOUNDARY}"


def _part(
    name: str, data: bytes, *, filename: str | None = None, ctype: str | None = None
) -> bytes:
    disposition = f'form-data; name="{name}"' + (
        f'; filename="{filename}"' if filename is not None else ""
    )
    head = f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n"
    if ctype:
        head += f"Content-Type: {ctype}\r\n"
    return head.encode() + b"\r\n" + data + b"\r\n"


def _body(*parts: bytes, close: bool = True) -> bytes:
    return b"".join(parts) + (f"--{BOUNDARY}--\r\n".encode() if close else b"")


async def _chunks(body: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


async def _consume(
    body: bytes, size: int = 7, *, content_type: str | None = CONTENT_TYPE, **limits: int
) -> tuple[Upload, list[bytes]]:
    upload = await open_upload(content_type, _chunks(body, size), limits=MultipartLimits(**limits))
    return upload, [chunk async for chunk in upload.chunks]


def test_file_bytes_come_through_chunk_by_chunk(run: Run) -> None:
    # File bytes that look like the start of a boundary must pass through untouched.
    data = sample(PNG, 5000) + b"\r\n--" + BOUNDARY[:-3].encode() + b"\r\n-- tail"
    body = _body(
        _part("purpose", b"reference"),
        _part("file", data, filename="photo.png", ctype="image/png"),
        _part("note", "caf\u00e9".encode()),
    )
    upload, chunks = run(_consume(body, size=7))
    assert upload.filename == "photo.png"
    assert upload.content_type == "image/png"
    assert b"".join(chunks) == data
    # At most one body chunk plus what the parser held back as a possible boundary.
    assert max(len(c) for c in chunks) <= 7 + len(BOUNDARY) + 4
    assert len(chunks) > len(data) // 100
    assert upload.fields == {"purpose": "reference", "note": "caf\u00e9"}


def test_a_large_upload_streams_into_the_store(run: Run, tmp_path: Path) -> None:
    data = sample(PNG, 5 * 1024 * 1024 + 123)
    body = _body(_part("file", data, filename="big.png"))

    async def scenario() -> tuple[Upload, str, int]:
        upload = await open_upload(CONTENT_TYPE, _chunks(body, 64 * 1024))
        info = await LocalBlobStore(tmp_path).write("t/up", upload.chunks, max_bytes=10 << 20)
        return upload, info.sha256, info.size_bytes

    upload, sha256, size = run(scenario())
    assert (sha256, size) == (hashlib.sha256(data).hexdigest(), len(data))
    assert upload.content_type == "application/octet-stream"  # none declared


def _error(
    run: Run,
    body: bytes,
    *,
    size: int = 7,
    content_type: str | None = CONTENT_TYPE,
    **limits: int,
) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        run(_consume(body, size, content_type=content_type, **limits))
    return caught.value


def test_too_many_parts(run: Run) -> None:
    fields = [_part(f"f{i}", b"x") for i in range(8)]
    error = _error(run, _body(*fields, _part("file", b"data", filename="a.png")))
    assert isinstance(error, ValidationFailed)
    assert "more than 8 parts" in error.message
    _, chunks = run(_consume(_body(*fields[:7], _part("file", b"data", filename="a.png"))))
    assert b"".join(chunks) == b"data"  # eight parts in all are fine


def test_huge_part_header(run: Run) -> None:
    padding = "x" * (9 * 1024)
    body = _body(_part("file", b"data", filename="a.png", ctype=f"image/png; pad={padding}"))
    for size in (1024, len(body)):  # in pieces, and in one chunk
        error = _error(run, body, size=size)
        assert isinstance(error, ValidationFailed)
        assert "headers exceed 8192 bytes" in error.message
    lines = "".join(f"X-{i}: y\r\n" for i in range(10))
    many = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n{lines}'
    error = _error(run, many.encode() + b"\r\ndata\r\n" + f"--{BOUNDARY}--\r\n".encode())
    assert "too many headers" in error.message


def test_many_header_pieces_add_up(run: Run) -> None:
    """Several header lines, each under the parser's per-line limit, together over 8 KiB."""
    lines = "".join(f"X-Pad-{i}: {'y' * 2000}\r\n" for i in range(5))
    head = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n{lines}'
    body = head.encode() + b"\r\ndata\r\n" + f"--{BOUNDARY}--\r\n".encode()
    error = _error(run, body, size=512, max_part_header_bytes=8 * 1024)
    assert "headers exceed 8192 bytes" in error.message


@pytest.mark.parametrize(
    ("content_type", "status", "words"),
    [
        ("multipart/form-data", 422, "no multipart boundary"),
        ('multipart/form-data; boundary=""', 422, "no multipart boundary"),
        ("multipart/form-data; boundary=" + "b" * 71, 422, "invalid multipart boundary"),
        ("application/json", 415, "multipart/form-data"),
        ("multipart/mixed; boundary=abc", 415, "multipart/form-data"),
        (None, 415, "multipart/form-data"),
    ],
)
def test_content_type_problems(run: Run, content_type: str | None, status: int, words: str) -> None:
    body = _body(_part("file", b"data", filename="a.png"))
    error = _error(run, body, content_type=content_type)
    assert error.status_code == status
    assert words in error.message
    assert isinstance(error, UnsupportedMediaType if status == 415 else ValidationFailed)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (_body(_part("purpose", b"x")), "no part named 'file'"),
        (_body(), "no part named 'file'"),
        (_body(_part("file", b"not a file")), "must be a file part"),
        (_body(_part("image", b"data", filename="a.png")), "part named 'file'"),
        (_body(_part("file", b"data", filename="a.png"), close=False), "ended before"),
        (_body(_part("purpose", b"x" * 70_000), _part("file", b"d", filename="a")), "longer"),
        (b"this is not multipart at all", "not well-formed"),
        (f"--{BOUNDARY}\r\nno colon here\r\n\r\n".encode(), "not well-formed"),
    ],
)
def test_missing_or_malformed_parts(run: Run, body: bytes, words: str) -> None:
    error = _error(run, body)
    assert isinstance(error, ValidationFailed)
    assert words in error.message


def test_a_second_file_fails_the_upload_and_the_store_keeps_nothing(
    run: Run, tmp_path: Path
) -> None:
    body = _body(
        _part("file", b"first" * 1000, filename="a.png"),
        _part("file", b"second", filename="b.png"),
    )
    store = LocalBlobStore(tmp_path)

    async def scenario() -> None:
        upload = await open_upload(CONTENT_TYPE, _chunks(body, 100))
        await store.write("t/up", upload.chunks, max_bytes=1 << 20)

    with pytest.raises(ValidationFailed) as caught:
        run(scenario())
    assert "only one file" in caught.value.message
    assert [d.field for d in caught.value.details] == ["file"]
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_body_cap(run: Run) -> None:
    body = _body(_part("file", b"z" * 10_000, filename="a.png"))
    error = _error(run, body, size=1000, max_body_bytes=5000)
    assert isinstance(error, PayloadTooLarge)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("photo.png", "photo.png"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\photo.png", "photo.png"),
        ("..", "upload"),
        ("", "upload"),
        (".env", "env"),
        ('a"b<c>|d?.png', "abcd.png"),
        ("bad\x00name\r\n.wav", "badname.wav"),
        ("r\u00e9sum\u00e9.png", "r\u00e9sum\u00e9.png"),
        # Bidi overrides and isolates, zero-width and other format characters (Cf), C1
        # controls, line separators: invisible, or showing a name other than the real one.
        ("invoice\u202egnp.exe", "invoicegnp.exe"),
        ("a\u202db\u2066c\u2067d\u2068e\u2069f\u200e\u200f.png", "abcdef.png"),
        ("\ufeffzero\u200bwidth\u200c\u200d\u2060.wav", "zerowidth.wav"),
        ("soft\u00adhyphen\u061c.png", "softhyphen.png"),
        ("c1\u0085\u009b.png", "c1.png"),
        ("line\u2028para\u2029.png", "linepara.png"),
        ("\u202e.png", "png"),
        ("\u202e", "upload"),
        ("\u05e9\u05dc\u05d5\u05dd.png", "\u05e9\u05dc\u05d5\u05dd.png"),  # RTL letters stay
    ],
)
def test_sanitize_filename(raw: str, clean: str) -> None:
    assert sanitize_filename(raw) == clean


def test_no_format_or_control_character_survives() -> None:
    invisible = {"Cc", "Cf", "Cs", "Zl", "Zp"}
    survivors = [
        f"U+{code:04X}"
        for code in range(0x110000)
        if unicodedata.category(chr(code)) in invisible
        and chr(code) in sanitize_filename(f"a{chr(code)}b.png")
    ]
    assert survivors == []


def test_an_uploaded_name_is_stored_without_a_bidi_override(run: Run) -> None:
    body = _body(_part("file", PNG, filename="cat\u202egnp.exe", ctype="image/png"))
    upload = run(open_upload(CONTENT_TYPE, _chunks(body, 7)))
    assert upload.filename == "catgnp.exe"


def test_long_filenames_keep_their_extension() -> None:
    name = sanitize_filename("n" * 500 + ".flac")
    assert name.endswith(".flac") and len(name.encode()) <= 200
