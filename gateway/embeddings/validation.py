"""Embeddings request checks beyond types, and the input's token bound.

Every problem becomes a `{field, message}` detail of one 400 `invalid_request` naming the
field as the client sent it (`input[3]`, `dimensions`), as on chat. The token bound sizes the
hold: a text's UTF-8 bytes bound its tokens (byte-level tokenizers never make more tokens
than bytes), a token array's length is exact. The estimate (a text's bytes / 4, rounded up)
is what the tokens-per-minute limit reserves, and what is charged when the upstream reports
no count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from gateway.errors import ErrorDetail, InvalidRequest, fields_message
from gateway.schemas.embeddings import (
    ENCODING_FORMATS,
    MAX_INPUTS,
    MAX_TOKEN_ID,
    EmbeddingsRequest,
)

__all__ = ["EmbeddingInputs", "check_embeddings_request"]

_BYTES_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class EmbeddingInputs:
    """The request's inputs as a list (strings, or token arrays), and their token counts."""

    items: list[str] | list[list[int]]
    bound: int
    """At most this many input tokens: what the hold prices."""
    estimate: int
    """About this many: the tokens-per-minute reservation, the charge without usage."""
    base64: bool


def check_embeddings_request(request: EmbeddingsRequest) -> EmbeddingInputs:
    """The inputs to embed; 400 `invalid_request` naming every field at fault."""
    problems: list[ErrorDetail] = []

    def bad(field: str, message: str) -> None:
        problems.append(ErrorDetail(field=field, message=message))

    if not request.model:
        bad("model", "must be a model id or 'auto'")
    if request.dimensions is not UNSET and request.dimensions < 1:
        bad("dimensions", "must be at least 1")
    if request.encoding_format is not UNSET and request.encoding_format not in ENCODING_FORMATS:
        bad("encoding_format", f"must be one of {', '.join(ENCODING_FORMATS)}")
    items = _items(request.input, bad)
    if problems:
        raise InvalidRequest(fields_message(problems), details=problems)
    bound = estimate = 0
    for item in items:
        if isinstance(item, str):
            size = len(item.encode("utf-8"))
            bound += size
            estimate += -(-size // _BYTES_PER_TOKEN)
        else:
            bound += len(item)
            estimate += len(item)
    return EmbeddingInputs(
        items=items, bound=bound, estimate=estimate, base64=request.encoding_format == "base64"
    )


def _items(value: str | list[Any], bad: Any) -> Any:
    """`input` as a list of strings or of token arrays; problems reported through `bad`."""
    if isinstance(value, str):
        if not value:
            bad("input", "must not be empty")
        return [value]
    if not value:
        bad("input", "must not be an empty array")
        return []
    if len(value) > MAX_INPUTS:
        bad("input", f"at most {MAX_INPUTS} inputs per request")
        return []
    if all(_token(v) for v in value):  # one token array
        return [value]
    first = value[0]
    if type(first) is int:
        for index, item in enumerate(value):
            if not _token(item):
                bad(f"input[{index}]", f"token ids are integers from 0 to {MAX_TOKEN_ID}")
        return value
    if isinstance(first, str):
        for index, item in enumerate(value):
            if not isinstance(item, str):
                bad(f"input[{index}]", "expected a string, as the first input is")
            elif not item:
                bad(f"input[{index}]", "must not be empty")
        return value
    if isinstance(first, list):
        for index, item in enumerate(value):
            if not isinstance(item, list):
                bad(f"input[{index}]", "expected an array of token ids, as the first input is")
            elif not item:
                bad(f"input[{index}]", "must not be an empty array")
            elif not all(_token(v) for v in item):
                bad(f"input[{index}]", f"token ids are integers from 0 to {MAX_TOKEN_ID}")
        return value
    bad("input", "expected a string, an array of strings, of token ids or of token arrays")
    return []


def _token(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_TOKEN_ID
