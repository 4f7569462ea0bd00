"""The simulator's embeddings: deterministic unit vectors, offline.

A vector is drawn from SHAKE-256 of the model and the input (a string, or a token array as
its ids), so the same input and model give the same vector on every run and machine: 256
components mapped to [-1, 1] and normalized to length 1. `dimensions` keeps the first N and
normalizes again (as OpenAI's shortened embeddings are); more than 256 is refused naming the
field. The reported input tokens are a text's UTF-8 bytes / 4 rounded up (a token array's
length), so a call is charged as a real one is.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from providers.base import EmbeddingResult
from providers.errors import UpstreamRejectedRequest

__all__ = ["DIMENSIONS", "embed", "unit_vector"]

DIMENSIONS = 256
_SCALE = 2.0 / 0xFFFF


def embed(body: dict[str, Any]) -> EmbeddingResult:
    model = str(body.get("model", ""))
    dimensions = body.get("dimensions")
    size = DIMENSIONS
    if dimensions is not None:
        if type(dimensions) is not int or not 1 <= dimensions <= DIMENSIONS:
            raise UpstreamRejectedRequest(
                f"this model gives 1 to {DIMENSIONS} dimensions", field="dimensions"
            )
        size = dimensions
    vectors: list[list[float]] = []
    tokens = 0
    for item in body.get("input") or ():
        if isinstance(item, str):
            key = item.encode("utf-8")
            tokens += max(1, -(-len(key) // 4))
        else:
            key = b"tokens:" + ",".join(str(t) for t in item).encode()
            tokens += len(item)
        vectors.append(unit_vector(model, key, size))
    return EmbeddingResult(vectors=vectors, prompt_tokens=tokens)


def unit_vector(model: str, key: bytes, size: int = DIMENSIONS) -> list[float]:
    """The first `size` components of the input's 256, normalized to length 1."""
    raw = hashlib.shake_256(model.encode() + b"\0" + key).digest(DIMENSIONS * 2)
    values = [
        int.from_bytes(raw[i : i + 2], "little") * _SCALE - 1.0 for i in range(0, size * 2, 2)
    ]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]
