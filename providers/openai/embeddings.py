"""OpenAI's Embeddings API behind `providers.base.EmbeddingsProvider`, for every upstream that
speaks it (OpenAI, Azure OpenAI, OpenAI-compatible servers such as vLLM, Ollama, TEI).

    POST {base_url}/embeddings    the gateway's body as is (its `model` the upstream name)

The body is passed through: `dimensions`, `encoding_format` and `user` go as the client sent
them. The answer's vectors are read whether the upstream sent floats or base64 (the
little-endian float32 values, as OpenAI encodes them), in `index` order, with
`usage.prompt_tokens` when present (some compatible servers send none).
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any

import msgspec

from providers.base import EmbeddingResult
from providers.errors import ProviderError
from providers.openai.errors import error_event

__all__ = ["MAX_EMBEDDINGS_BYTES", "embeddings_from_bytes", "vector_of"]

MAX_EMBEDDINGS_BYTES = 128 * 1024 * 1024
"""The largest embeddings answer read (2048 inputs of 3072 floats as JSON fit)."""

_decode = msgspec.json.decode


def embeddings_from_bytes(raw: bytes) -> EmbeddingResult:
    """An OpenAI `list` of `embedding` objects; ProviderError for anything else."""
    try:
        body = _decode(raw)
    except msgspec.DecodeError as exc:
        raise ProviderError(f"upstream sent malformed JSON: {exc}") from exc
    if type(body) is not dict or type(body.get("data")) is not list:
        if type(body) is dict and "error" in body:
            raise error_event(body)
        raise ProviderError("upstream answer is not a list of embeddings")
    items: list[tuple[int, list[float]]] = []
    for position, item in enumerate(body["data"]):
        if type(item) is not dict:
            raise ProviderError("upstream embedding is not an object")
        index = item.get("index", position)
        if type(index) is not int:
            raise ProviderError("upstream embedding has no integer index")
        items.append((index, vector_of(item.get("embedding"))))
    items.sort(key=lambda pair: pair[0])
    usage = body.get("usage")
    tokens = usage.get("prompt_tokens") if type(usage) is dict else None
    return EmbeddingResult(
        vectors=[vector for _, vector in items],
        prompt_tokens=tokens if type(tokens) is int and tokens > 0 else None,
    )


def vector_of(value: Any) -> list[float]:
    """A vector as floats, sent as numbers or as base64 of little-endian float32."""
    if type(value) is list:
        if not all(type(v) is float or type(v) is int for v in value):
            raise ProviderError("upstream embedding holds something other than numbers")
        return [float(v) for v in value]
    if type(value) is str:
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error as exc:
            raise ProviderError("upstream embedding is not valid base64") from exc
        if len(raw) % 4:
            raise ProviderError("upstream base64 embedding is not a whole number of float32")
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    raise ProviderError("upstream embedding is neither an array nor base64")
