"""Streaming `multipart/form-data` uploads: one file part named `file`, yielded chunk by chunk.

`open_upload` reads the body only until the file part's headers are parsed, then hands back
its name, declared type and an async iterator of its bytes for `BlobStore.write`: each body
chunk is parsed as it arrives (python-multipart's push parser) and only the file bytes found
in it are passed on, so memory stays at about one chunk whatever the upload's size. After the
file part ends, the iterator reads the rest of the body before finishing, so a second file,
too many parts or a truncated body fail the upload (and the store discards its temp file)
instead of passing unnoticed. Other, small text fields are kept in `Upload.fields`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from gateway.artifacts.errors import invalid_input
from gateway.errors import PayloadTooLarge, UnsupportedMediaType

__all__ = ["FILE_PART", "MultipartLimits", "Upload", "open_upload", "sanitize_filename"]

FILE_PART = "file"
_BOUNDARY = re.compile(r"^[0-9A-Za-z'()+_,./:=? -]{0,69}[0-9A-Za-z'()+_,./:=?-]$")
"""RFC 2046 bchars, 1 to 70 characters, not ending in a space."""
_FILENAME_DROP = re.compile(r'[\x00-\x1f\x7f<>:"|?*\\]')
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories dropped from names: controls (C0 and C1), format characters (bidi
overrides and isolates such as U+202E, zero-width ones, the BOM), surrogates, line and
paragraph separators. Zero-width joiners go too, so a joined emoji falls apart into its parts."""
_MAX_FILENAME_BYTES = 200


@dataclass(frozen=True, slots=True)
class MultipartLimits:
    max_parts: int = 8
    max_part_header_bytes: int = 8 * 1024
    """All header lines of one part together."""
    max_field_bytes: int = 64 * 1024
    """A non-file field's value."""
    max_body_bytes: int | None = None
    """The whole body; `PayloadTooLarge` past it. The file's own cap is the store's."""


@dataclass(frozen=True, slots=True)
class Upload:
    filename: str
    """Sanitised: a bare name, safe to show and to use as a download name."""
    content_type: str
    """As the client declared it (sniff the bytes before trusting it)."""
    chunks: AsyncIterator[bytes]
    fields: dict[str, str] = field(default_factory=dict)
    """Other form fields; complete only once `chunks` is exhausted."""


def sanitize_filename(name: str) -> str:
    """A bare, printable file name: no folders, quotes, controls or invisible format
    characters (a right-to-left override, U+202E, before `gnp.exe` shows `exe.png`);
    "upload" if nothing is left."""
    name = unicodedata.normalize("NFC", name).replace("\\", "/").rsplit("/", 1)[-1]
    name = _FILENAME_DROP.sub("", name)
    if not name.isascii():
        name = "".join(ch for ch in name if unicodedata.category(ch) not in _INVISIBLE)
    name = name.strip().lstrip(".").strip()
    while len(name.encode("utf-8")) > _MAX_FILENAME_BYTES:
        stem, dot, ext = name.rpartition(".")
        name = f"{stem[:-1]}{dot}{ext}" if dot and stem and len(ext) <= 16 else name[:-1]
    return name or "upload"


class _Reader:
    """Feeds body chunks to the parser and keeps what its callbacks report."""

    def __init__(
        self, boundary: bytes, body: AsyncIterator[bytes], limits: MultipartLimits
    ) -> None:
        self._body = body
        self._limits = limits
        self._parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._part_begin,
                "on_header_field": self._header_field,
                "on_header_value": self._header_value,
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._part_data,
                "on_part_end": self._part_end,
                "on_end": self._end,
            },
            max_header_size=limits.max_part_header_bytes,
        )
        self.fields: dict[str, str] = {}
        self.file: tuple[str, str] | None = None
        """(filename, content type) once the file part's headers are in."""
        self.file_done = False
        self.pending: list[bytes] = []
        self._ended = False
        self._body_bytes = 0
        self._parts = 0
        self._kind = ""  # "file" or "field" for the current part
        self._header_bytes = 0
        self._name, self._value = bytearray(), bytearray()
        self._headers: dict[str, str] = {}
        self._field_name, self._field_value = "", bytearray()

    async def feed(self) -> None:
        """Parse the next body chunk; the body ending before the closing boundary is a 422."""
        chunk = await anext(self._body, None)
        if chunk is None:
            raise invalid_input("body", "ended before the closing multipart boundary.")
        self._body_bytes += len(chunk)
        cap = self._limits.max_body_bytes
        if cap is not None and self._body_bytes > cap:
            raise PayloadTooLarge(f"The request body exceeds the limit of {cap} bytes.")
        try:
            self._parser.write(chunk)
        except FormParserError as exc:
            raise invalid_input("body", _parse_error_message(exc, self._limits)) from exc

    @property
    def ended(self) -> bool:
        return self._ended

    def _part_begin(self) -> None:
        self._parts += 1
        if self._parts > self._limits.max_parts:
            raise invalid_input("body", f"has more than {self._limits.max_parts} parts.")
        self._headers, self._header_bytes, self._kind = {}, 0, ""

    def _count_header(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > self._limits.max_part_header_bytes:
            limit = self._limits.max_part_header_bytes
            raise invalid_input("body", f"has a part whose headers exceed {limit} bytes.")

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._count_header(end - start)
        self._name += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._count_header(end - start)
        self._value += data[start:end]

    def _header_end(self) -> None:
        name = self._name.decode("latin-1").strip().lower()
        self._headers[name] = self._value.decode("latin-1").strip()
        self._name, self._value = bytearray(), bytearray()

    def _headers_finished(self) -> None:
        disposition, params = parse_options_header(self._headers.get("content-disposition"))
        name = params.get(b"name", b"").decode("utf-8", "replace")
        if disposition != b"form-data" or not name:
            raise invalid_input("body", "has a part without 'Content-Disposition: form-data'.")
        filename = params.get(b"filename")
        if filename is None and name == FILE_PART:
            raise invalid_input(FILE_PART, "must be a file part (with a filename).")
        if filename is None:
            self._kind, self._field_name, self._field_value = "field", name, bytearray()
            return
        if self.file is not None:
            raise invalid_input(FILE_PART, "only one file may be uploaded.")
        if name != FILE_PART:
            raise invalid_input(FILE_PART, f"send the file as the part named '{FILE_PART}'.")
        declared, _ = parse_options_header(self._headers.get("content-type"))
        content_type = declared.decode("latin-1") or "application/octet-stream"
        self.file = (sanitize_filename(filename.decode("utf-8", "replace")), content_type)
        self._kind = "file"

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._kind == "file":
            self.pending.append(data[start:end])
        elif self._kind == "field":
            self._field_value += data[start:end]
            if len(self._field_value) > self._limits.max_field_bytes:
                limit = self._limits.max_field_bytes
                raise invalid_input(self._field_name, f"is longer than {limit} bytes.")

    def _part_end(self) -> None:
        if self._kind == "file":
            self.file_done = True
        elif self._kind == "field":
            self.fields[self._field_name] = self._field_value.decode("utf-8", "replace")
        self._kind = ""

    def _end(self) -> None:
        self._ended = True


def _parse_error_message(exc: FormParserError, limits: MultipartLimits) -> str:
    """The parser's own limits in our words; anything else is malformed."""
    reason = str(exc)
    if "header size" in reason:
        return f"has a part whose headers exceed {limits.max_part_header_bytes} bytes."
    if "header count" in reason:
        return "has a part with too many headers."
    return "is not well-formed multipart/form-data."


def _boundary(content_type: str | None) -> bytes:
    kind, params = parse_options_header(content_type)
    if kind != b"multipart/form-data":
        raise UnsupportedMediaType(f"Send multipart/form-data with a part named '{FILE_PART}'.")
    boundary = params.get(b"boundary", b"")
    if not boundary:
        raise invalid_input("Content-Type", "has no multipart boundary.")
    if not _BOUNDARY.match(boundary.decode("latin-1")):
        raise invalid_input("Content-Type", "has an invalid multipart boundary.")
    return boundary


async def open_upload(
    content_type: str | None,
    body: AsyncIterator[bytes],
    *,
    limits: MultipartLimits | None = None,
) -> Upload:
    """Parse up to the `file` part's headers; its bytes follow through `Upload.chunks`.

    `UnsupportedMediaType` unless multipart/form-data; `ValidationFailed` for a missing or bad
    boundary, a missing `file` part, a second file, too many parts or oversized part headers.
    """
    reader = _Reader(_boundary(content_type), body, limits or MultipartLimits())
    while reader.file is None:
        if reader.ended:
            raise invalid_input(FILE_PART, f"the upload has no part named '{FILE_PART}'.")
        await reader.feed()
    filename, declared = reader.file
    return Upload(filename, declared, _file_chunks(reader), reader.fields)


async def _file_chunks(reader: _Reader) -> AsyncIterator[bytes]:
    while True:
        if reader.pending:
            data = b"".join(reader.pending)
            reader.pending.clear()
            yield data
        if reader.file_done:
            break
        await reader.feed()
    while not reader.ended:  # the rest must still be well-formed and hold no second file
        await reader.feed()
