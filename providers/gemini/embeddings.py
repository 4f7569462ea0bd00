"""Embeddings on Google's Gemini models, for both places that serve them.

    Gemini API   POST <base_url>/models/<model>:batchEmbedContents     every input in one call
                 {"requests": [{"model": "models/<model>", "content": {"parts": [{"text"}]},
                                "outputDimensionality": N}]}
                 -> {"embeddings": [{"values": [...]}], "usageMetadata"?: {"promptTokenCount"}}
    Vertex AI    POST .../publishers/google/models/<model>:embedContent  one input per call
                 {"content": {"parts": [{"text"}]}, "outputDimensionality": N}
                 -> {"embedding": {"values": [...]}, "usageMetadata"?: {"promptTokenCount"}}

`dimensions` becomes `outputDimensionality`; the vectors of a shortened output are normalized
to length 1 (Google's are not below a model's full size; OpenAI's are, and clients compare
them by dot product). `usageMetadata.promptTokenCount` is read when the answer has it: the
embed endpoints of some models report no usage at all (gemini-embedding-001 answers with the
vectors alone), and the gateway then charges its own estimate. Token-array inputs have no
Gemini counterpart: refused naming `input`. `user` has none either and is dropped.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
from yarl import URL

from providers.all_or_none import all_or_none
from providers.base import EmbeddingResult
from providers.errors import ProviderError, UpstreamRejectedRequest
from providers.upstream import Upstream

__all__ = ["batch_embed", "embed_one_by_one", "texts_of"]

_encode = msgspec.json.encode
_decode = msgspec.json.decode


def texts_of(body: dict[str, Any]) -> list[str]:
    """The inputs as texts; UpstreamRejectedRequest naming `input` for token arrays."""
    items = body.get("input") or []
    if not all(isinstance(item, str) for item in items):
        raise UpstreamRejectedRequest(
            "token arrays are not supported by this model's upstream: send text", field="input"
        )
    return list(items)


async def batch_embed(
    upstream: Upstream, url: URL, model: str, body: dict[str, Any]
) -> EmbeddingResult:
    """The Gemini API's `batchEmbedContents`: every input in one call."""
    dimensions = body.get("dimensions")
    name = model if "/" in model else f"models/{model}"
    requests = []
    for text in texts_of(body):
        request: dict[str, Any] = {"model": name, "content": {"parts": [{"text": text}]}}
        if dimensions is not None:
            request["outputDimensionality"] = dimensions
        requests.append(request)
    answer = _object(await upstream.request("POST", url, _encode({"requests": requests})))
    embeddings = answer.get("embeddings")
    if type(embeddings) is not list:
        raise ProviderError("upstream answer has no embeddings")
    vectors = [_values(item, dimensions) for item in embeddings]
    return EmbeddingResult(vectors=vectors, prompt_tokens=_prompt_tokens(answer))


async def embed_one_by_one(upstream: Upstream, url: URL, body: dict[str, Any]) -> EmbeddingResult:
    """Vertex AI's `embedContent`, one call per input, all at once; the counts summed (None
    when any answer has none)."""
    dimensions = body.get("dimensions")

    async def one(text: str) -> dict[str, Any]:
        request: dict[str, Any] = {"content": {"parts": [{"text": text}]}}
        if dimensions is not None:
            request["outputDimensionality"] = dimensions
        return _object(await upstream.request("POST", url, _encode(request)))

    answers = await all_or_none(one(text) for text in texts_of(body))
    vectors = [_values(answer.get("embedding"), dimensions) for answer in answers]
    counts = [_prompt_tokens(answer) for answer in answers]
    total = None if any(count is None for count in counts) else sum(c or 0 for c in counts)
    return EmbeddingResult(vectors=vectors, prompt_tokens=total)


def _object(raw: bytes) -> dict[str, Any]:
    try:
        answer = _decode(raw)
    except msgspec.DecodeError as exc:
        raise ProviderError(f"upstream sent malformed JSON: {exc}") from exc
    if type(answer) is not dict:
        raise ProviderError("upstream answer is not a JSON object")
    return answer


def _values(item: object, dimensions: object) -> list[float]:
    values = item.get("values") if type(item) is dict else None
    if type(values) is not list or not all(type(v) in (float, int) for v in values):
        raise ProviderError("upstream embedding has no values")
    vector = [float(v) for v in values]
    if dimensions is not None:
        norm = math.sqrt(sum(v * v for v in vector))
        if norm > 0:
            vector = [v / norm for v in vector]
    return vector


def _prompt_tokens(answer: dict[str, Any]) -> int | None:
    usage = answer.get("usageMetadata")
    count = usage.get("promptTokenCount") if type(usage) is dict else None
    return count if type(count) is int and count > 0 else None
