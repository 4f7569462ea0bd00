"""JSON request bodies: depth, content type and decoding errors as 4xx naming the field."""

from __future__ import annotations

import msgspec
import pytest

from gateway.errors import InvalidRequest, UnsupportedMediaType, ValidationFailed
from gateway.http.json_body import (
    MAX_JSON_DEPTH,
    decode_json,
    nested_deeper_than,
    require_json_content_type,
)

ANY = msgspec.json.Decoder()


@pytest.mark.parametrize(
    ("body", "depth"),
    [
        (b"1", 0),
        (b"{}", 1),
        (b'{"a":[1,{"b":[]}]}', 4),
        (b'{"a":"[[[[{{{{"}', 1),  # brackets inside strings do not count
        (b'{"a":"\\"[[[","b":[[]]}', 3),  # nor after an escaped quote
        (b"[[],[],[[]]]", 3),
    ],
)
def test_depth_counts_only_structure(body: bytes, depth: int) -> None:
    assert not nested_deeper_than(body, depth)
    assert depth == 0 or nested_deeper_than(body, depth - 1)


def test_a_body_deep_at_its_end_is_deep() -> None:
    """The measure stops at the first level past the limit, wherever that is."""
    wide = b"[" + b"[]," * 100_000
    assert not nested_deeper_than(wide + b"[]]", 256)
    assert nested_deeper_than(wide + b"[" * 257 + b"]" * 257 + b"]", 256)
    assert not nested_deeper_than(wide + b"[" * 255 + b"]" * 255 + b"]", 256)


def test_the_depth_limit_is_exact() -> None:
    at_limit = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert decode_json(at_limit, ANY, ValidationFailed) is not None
    over = b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(ValidationFailed, match=f"more than {MAX_JSON_DEPTH} levels"):
        decode_json(over, ANY, ValidationFailed)


def test_many_brackets_side_by_side_are_not_deep() -> None:
    body = b"[" + b",".join([b"[]"] * 1000) + b"]"
    assert len(decode_json(body, ANY, InvalidRequest)) == 1000


def test_decoding_problems_name_the_body() -> None:
    with pytest.raises(InvalidRequest) as bad_utf8:
        decode_json(b'{"a":"\xc3("}', ANY, InvalidRequest)
    assert bad_utf8.value.details[0].field == "body"
    assert "invalid UTF-8 (byte 0xc3 at offset 6)" in bad_utf8.value.details[0].message

    with pytest.raises(InvalidRequest) as surrogate:
        decode_json(b'{"a":"\\udc00"}', ANY, InvalidRequest)
    assert "surrogate" in surrogate.value.details[0].message

    assert decode_json(b'{"a":"\\ud83d\\ude00"}', ANY, InvalidRequest) == {"a": "\U0001f600"}

    with pytest.raises(InvalidRequest, match="empty"):
        decode_json(b"", ANY, InvalidRequest)


def test_validation_errors_name_the_field() -> None:
    class Body(msgspec.Struct, forbid_unknown_fields=True):
        n: int

    with pytest.raises(ValidationFailed) as wrong:
        decode_json(b'{"n":"x"}', msgspec.json.Decoder(Body), ValidationFailed)
    assert wrong.value.details[0].field == "n"
    with pytest.raises(ValidationFailed) as unknown:
        decode_json(b'{"n":1,"m":2}', msgspec.json.Decoder(Body), ValidationFailed)
    assert unknown.value.details[0].field == "m"


@pytest.mark.parametrize(
    "value", ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON"]
)
def test_json_content_types(value: str) -> None:
    require_json_content_type(value)


@pytest.mark.parametrize("value", ["", "application/jsonx", "text/json", "application/json-seq"])
def test_other_content_types_are_415(value: str) -> None:
    with pytest.raises(UnsupportedMediaType):
        require_json_content_type(value)
