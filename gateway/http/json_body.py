"""JSON request bodies: the content type, the nesting depth and the decoding, each a client's
mistake answered as a 4xx in the envelope that names the field, never a 500.

Nesting is limited to `MAX_JSON_DEPTH` levels (objects and arrays, the body itself included).
Deeper bodies are refused before decoding: the decoder recurses per level, and a body nested
thousands deep would otherwise end in a RecursionError. A body needs more opening brackets than
the limit to break it, so the check costs two byte counts for almost every body (a 100-message
conversation has ~100); only larger ones are measured, with byte operations (~5 µs per KiB).
"""

from __future__ import annotations

import re
from array import array
from itertools import accumulate
from typing import TypeVar

import msgspec

from gateway.errors import ErrorDetail, GatewayError, UnsupportedMediaType

__all__ = [
    "MAX_JSON_DEPTH",
    "decode_json",
    "error_detail",
    "json_depth",
    "require_json_content_type",
]

T = TypeVar("T")

MAX_JSON_DEPTH = 256

_SIGNS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def require_json_content_type(content_type: str) -> None:
    """415 unless the media type is exactly application/json (parameters such as charset ok)."""
    media_type = content_type.partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType(
            f"Send the body as JSON with 'Content-Type: application/json' (got {content_type!r})."
        )


def json_depth(body: bytes) -> int:
    """The deepest nesting of objects and arrays in `body` (brackets inside strings ignored)."""
    # Escapes out, then only quotes and brackets; every other piece between quotes is outside
    # a string. What is left maps to +1/-1 per bracket, and the deepest running sum is it.
    structure = body.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    signs = b"".join(structure.split(b'"')[::2]).translate(_SIGNS)
    return max(accumulate(array("b", signs)), default=0)


def decode_json(body: bytes, decoder: msgspec.json.Decoder[T], error: type[GatewayError]) -> T:
    """Decode and type-check `body`; every problem raises `error` (400 or 422) with details."""
    if not body:
        raise error(
            "The request body is empty.",
            details=[ErrorDetail(field="body", message="send a JSON object")],
        )
    if body.count(b"{") + body.count(b"[") > MAX_JSON_DEPTH and json_depth(body) > MAX_JSON_DEPTH:
        raise error(
            f"The request body is nested more than {MAX_JSON_DEPTH} levels deep.",
            details=[ErrorDetail(field="body", message=f"at most {MAX_JSON_DEPTH} levels")],
        )
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise error(str(exc), details=[error_detail(exc)]) from exc
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise error(
            "The request body is not valid JSON.",
            details=[ErrorDetail(field="body", message=_decode_problem(body, exc))],
        ) from exc


def _decode_problem(body: bytes, exc: Exception) -> str:
    """What is wrong with bytes that did not decode, said better than the decoder does."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"invalid UTF-8 (byte 0x{body[bad.start]:02x} at offset {bad.start})"
    surrogate = _LONE_SURROGATE.search(body)
    if surrogate is not None:
        escape = surrogate.group().decode()
        return (
            f"{escape} at offset {surrogate.start()} is half of a UTF-16 surrogate pair; "
            "strings must be valid Unicode"
        )
    return str(exc)


def error_detail(exc: msgspec.ValidationError) -> ErrorDetail:
    """The field a msgspec validation error is about, as a dotted path, and the problem."""
    message, _, at = str(exc).partition(" - at `$")
    # msgspec writes a mapping's value as `[...]` (it does not say which key): name the map.
    field = at.rstrip("`").lstrip(".").replace("[...]", "") if at else "body"
    if message.startswith("Object contains unknown field"):
        name = message.split("`")[1] if "`" in message else ""
        message = f"unrecognized request argument: {name}"
        field = f"{field}.{name}".lstrip(".") if field != "body" else name
    elif message.startswith("Object missing required field"):
        name = message.split("`")[1] if "`" in message else ""
        field = f"{field}.{name}".lstrip(".") if field != "body" else name
        message = "this field is required"
    return ErrorDetail(field=field or "body", message=message)
