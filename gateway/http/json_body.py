"""JSON request bodies: the content type, the nesting depth and the decoding, each a client's
mistake answered as a 4xx in the envelope that names the field, never a 500.

Nesting is limited to `MAX_JSON_DEPTH` levels (objects and arrays, the body itself included).
Deeper bodies are refused before decoding: the decoder recurses per level, and a body nested
thousands deep would otherwise end in a RecursionError. A body needs more opening brackets than
the limit to break it, so the check costs two byte counts for almost every body (a 100-message
conversation has ~100); only larger ones are measured, with byte operations (~5 µs per KiB), and
the measure stops at the first level past the limit: a 10 MiB body of opening brackets had held
the event loop 0.76 s while every level was summed (now 0.09 s).
"""

from __future__ import annotations

import re
from array import array
from itertools import accumulate
from typing import Any, TypeVar

import msgspec

from gateway.errors import (
    ErrorDetail,
    GatewayError,
    InvalidRequest,
    PayloadTooLarge,
    UnsupportedMediaType,
    decode_detail,
    fields_message,
)

__all__ = [
    "MAX_JSON_DEPTH",
    "OPTIONS_HINT",
    "decode_json",
    "nested_deeper_than",
    "read_body",
    "require_json_content_type",
]

T = TypeVar("T")

MAX_JSON_DEPTH = 256
OPTIONS_HINT = "model-specific options go in model_options"
"""Said of an unknown top-level field of a body that has `model_options`."""

_SIGNS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


async def read_body(receive: Any, limit: int) -> bytes:
    """A raw ASGI handler's request body, whole: 413 past `limit` bytes, 400 when the client
    left before sending it all."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away before sending it all
            raise InvalidRequest("The request body was not received completely.")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def require_json_content_type(content_type: str) -> None:
    """415 unless the media type is exactly application/json (parameters such as charset ok)."""
    media_type = content_type.partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType(
            f"Send the body as JSON with 'Content-Type: application/json' (got {content_type!r})."
        )


def nested_deeper_than(body: bytes, limit: int) -> bool:
    """Whether objects and arrays in `body` nest more than `limit` levels (brackets inside
    strings ignored)."""
    # Escapes out, then only quotes and brackets; every other piece between quotes is outside
    # a string. What is left maps to +1/-1 per bracket, and the running sum is the depth: it
    # steps by one, so it goes past the limit at `limit + 1` (`in` stops there, in C).
    structure = body.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    signs = b"".join(structure.split(b'"')[::2]).translate(_SIGNS)
    return limit + 1 in accumulate(array("b", signs))


def decode_json(
    body: bytes,
    decoder: msgspec.json.Decoder[T],
    error: type[GatewayError],
    *,
    unknown_hint: str = "",
) -> T:
    """Decode and type-check `body`; every problem raises `error` (400 or 422) with details
    that name the field as the client sent it (`unknown_hint` follows an unknown top-level
    field's `unknown field`)."""
    if not body:
        detail = ErrorDetail(field="body", message="is empty; send a JSON object")
        raise error(fields_message([detail]), details=[detail])
    if body.count(b"{") + body.count(b"[") > MAX_JSON_DEPTH and nested_deeper_than(
        body, MAX_JSON_DEPTH
    ):
        detail = ErrorDetail(field="body", message=f"nested more than {MAX_JSON_DEPTH} levels")
        raise error(fields_message([detail]), details=[detail])
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        detail = decode_detail(exc, unknown_hint=unknown_hint)
        raise error(fields_message([detail]), details=[detail]) from exc
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        detail = ErrorDetail(field="body", message=_decode_problem(body, exc))
        raise error(fields_message([detail]), details=[detail]) from exc


def _decode_problem(body: bytes, exc: Exception) -> str:
    """What is wrong with bytes that did not decode, said better than the decoder does."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"not valid JSON: invalid UTF-8 (byte 0x{body[bad.start]:02x} at offset {bad.start})"
    surrogate = _LONE_SURROGATE.search(body)
    if surrogate is not None:
        escape = surrogate.group().decode()
        return (
            f"not valid JSON: {escape} at offset {surrogate.start()} is half of a UTF-16 "
            "surrogate pair; strings must be valid Unicode"
        )
    return f"not valid JSON: {exc}"
