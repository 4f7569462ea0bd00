"""The embeddings request and answer as OpenAI's `POST /v1/embeddings` has them.

`input` is a string, an array of strings, an array of token ids or an array of token arrays.
msgspec decodes one array type per union, so the value is decoded as `str | list[Any]` and its
shape is checked by `gateway.embeddings.validation`, which names the item at fault; the JSON
Schema below states the four shapes for the OpenAPI document.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = [
    "ENCODING_FORMATS",
    "MAX_INPUTS",
    "MAX_TOKEN_ID",
    "Embedding",
    "EmbeddingList",
    "EmbeddingUsage",
    "EmbeddingsRequest",
]

ENCODING_FORMATS = ("float", "base64")
MAX_INPUTS = 2048
"""Inputs per request at most (OpenAI's limit)."""
MAX_TOKEN_ID = 2**31 - 1

_TOKENS = {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}}
_INPUT = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_INPUTS,
            "items": {"type": "string", "minLength": 1},
        },
        _TOKENS,
        {"type": "array", "minItems": 1, "maxItems": MAX_INPUTS, "items": _TOKENS},
    ]
}


def _doc(**schema: Any) -> Meta:
    return Meta(extra_json_schema=schema)


class EmbeddingsRequest(
    msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True
):
    model: Annotated[str, _doc(minLength=1, examples=["auto"])]
    input: Annotated[str | list[Any], _doc(allOf=[_INPUT])]
    dimensions: Annotated[int | UnsetType, _doc(minimum=1)] = UNSET
    encoding_format: Annotated[str | UnsetType, _doc(enum=list(ENCODING_FORMATS))] = UNSET
    user: str | UnsetType = UNSET


class Embedding(msgspec.Struct, kw_only=True):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: Annotated[
        list[float] | str,
        _doc(
            description="The vector: floats, or with `encoding_format: base64` the base64 of "
            "its little-endian float32 values."
        ),
    ]


class EmbeddingUsage(msgspec.Struct, kw_only=True, omit_defaults=True):
    prompt_tokens: int
    total_tokens: int
    credits: Annotated[str, _doc(description="The charge, as a decimal string.")]
    credits_usd_reference: str
    estimated: bool = False
    """True when the upstream reported no token count and the gateway's estimate was charged."""


class EmbeddingList(msgspec.Struct, kw_only=True):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage
