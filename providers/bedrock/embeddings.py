"""Embeddings on Bedrock through `InvokeModel`, in each model family's own body.

    POST <endpoint>/model/<model id, percent-encoded>/invoke

    Titan Text Embeddings   one input per call (all at once):
                            {"inputText", "dimensions"?, "normalize": true}
                            -> {"embedding": [...], "inputTextTokenCount": N}
                            v2 gives 256, 512 or 1024 dimensions; v1 takes the text alone
    Cohere Embed            up to 96 inputs per call:
                            {"texts", "input_type": "search_document", "embedding_types": ["float"],
                             "output_dimension"? (v4)}
                            -> {"embeddings": [[...]] | {"float": [[...]]}}

The family is read from the model id (`cohere.embed-*`; anything else is taken as Titan).
Titan reports its input tokens; Cohere on Bedrock reports none in its body, so the gateway
charges its estimate. What a family cannot take is refused before sending, naming the field:
token-array inputs (`input`), a size the model does not give (`dimensions`).
"""

from __future__ import annotations

from typing import Any

import msgspec
from yarl import URL

from providers.all_or_none import all_or_none
from providers.base import EmbeddingResult
from providers.errors import ProviderError, UpstreamRejectedRequest
from providers.openai.embeddings import vector_of
from providers.upstream import Upstream

__all__ = ["COHERE_BATCH", "bedrock_embed"]

COHERE_BATCH = 96
_TITAN_V2_SIZES = (256, 512, 1024)
_COHERE_V4_SIZES = (256, 512, 1024, 1536)
_JSON = {"Content-Type": "application/json", "Accept": "application/json"}
_encode = msgspec.json.encode
_decode = msgspec.json.decode


async def bedrock_embed(
    upstream: Upstream, url: URL, model: str, body: dict[str, Any]
) -> EmbeddingResult:
    """The vectors of `body`'s inputs from the model at `url` (its `/invoke`)."""
    items = body.get("input") or []
    if not all(isinstance(item, str) for item in items):
        raise UpstreamRejectedRequest(
            "token arrays are not supported by this model's upstream: send text", field="input"
        )
    texts: list[str] = list(items)
    dimensions = body.get("dimensions")
    if "cohere.embed" in model:
        return await _cohere(upstream, url, model, texts, dimensions)
    return await _titan(upstream, url, model, texts, dimensions)


async def _titan(
    upstream: Upstream, url: URL, model: str, texts: list[str], dimensions: object
) -> EmbeddingResult:
    v1 = "titan-embed-text-v1" in model
    if dimensions is not None and (v1 or dimensions not in _TITAN_V2_SIZES):
        sizes = ", ".join(map(str, _TITAN_V2_SIZES))
        message = "this model has one size" if v1 else f"this model gives {sizes} dimensions"
        raise UpstreamRejectedRequest(message, field="dimensions")

    async def one(text: str) -> tuple[list[float], int | None]:
        request: dict[str, Any] = {"inputText": text}
        if not v1:
            if dimensions is not None:
                request["dimensions"] = dimensions
            request["normalize"] = True
        answer = _object(await upstream.request("POST", url, _encode(request), headers=_JSON))
        count = answer.get("inputTextTokenCount")
        return vector_of(answer.get("embedding")), count if type(count) is int else None

    answers = await all_or_none(one(text) for text in texts)
    counts = [count for _, count in answers]
    total = None if any(count is None for count in counts) else sum(c or 0 for c in counts)
    return EmbeddingResult(vectors=[vector for vector, _ in answers], prompt_tokens=total)


async def _cohere(
    upstream: Upstream, url: URL, model: str, texts: list[str], dimensions: object
) -> EmbeddingResult:
    v4 = "embed-v4" in model
    if dimensions is not None and (not v4 or dimensions not in _COHERE_V4_SIZES):
        sizes = ", ".join(map(str, _COHERE_V4_SIZES))
        message = f"this model gives {sizes} dimensions" if v4 else "this model has one size"
        raise UpstreamRejectedRequest(message, field="dimensions")

    async def batch(part: list[str]) -> list[list[float]]:
        request: dict[str, Any] = {
            "texts": part,
            "input_type": "search_document",
            "embedding_types": ["float"],
        }
        if dimensions is not None:
            request["output_dimension"] = dimensions
        answer = _object(await upstream.request("POST", url, _encode(request), headers=_JSON))
        embeddings = answer.get("embeddings")
        if type(embeddings) is dict:
            embeddings = embeddings.get("float")
        if type(embeddings) is not list:
            raise ProviderError("upstream answer has no float embeddings")
        return [vector_of(vector) for vector in embeddings]

    parts = [texts[i : i + COHERE_BATCH] for i in range(0, len(texts), COHERE_BATCH)]
    batches = await all_or_none(batch(part) for part in parts)
    return EmbeddingResult(vectors=[vector for part in batches for vector in part])


def _object(raw: bytes) -> dict[str, Any]:
    try:
        answer = _decode(raw)
    except msgspec.DecodeError as exc:
        raise ProviderError(f"upstream sent malformed JSON: {exc}") from exc
    if type(answer) is not dict:
        raise ProviderError("upstream answer is not a JSON object")
    return answer
