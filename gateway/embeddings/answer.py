"""An embeddings call's answer: the charge of what the upstream reported, and OpenAI's `list`
of `embedding` objects with `usage.credits`, floats or base64 as the client asked.

The charge is the upstream's `prompt_tokens`, never past the input's bound (what the hold was
priced from); when it reports none, the estimate, and `usage.estimated` says so.
"""

from __future__ import annotations

import base64
import struct
from decimal import Decimal

import msgspec

from gateway.billing.money import format_credits, format_usd
from gateway.billing.pricing import ChatPrice
from gateway.embeddings.validation import EmbeddingInputs
from gateway.schemas.embeddings import Embedding, EmbeddingList, EmbeddingUsage
from providers.base import EmbeddingResult

__all__ = ["embeddings_answer"]

_encode = msgspec.json.Encoder().encode


def embeddings_answer(
    model: str,
    price: ChatPrice,
    inputs: EmbeddingInputs,
    result: EmbeddingResult,
    credits_per_usd: Decimal,
) -> tuple[bytes, int, int]:
    """The answer's JSON, the input tokens charged and the charge in units."""
    reported = result.prompt_tokens
    estimated = reported is None or reported <= 0
    tokens = inputs.estimate if estimated or reported is None else min(reported, inputs.bound)
    units = price.charge_units(tokens, 0)
    data = [
        Embedding(index=index, embedding=_encoded(vector) if inputs.base64 else vector)
        for index, vector in enumerate(result.vectors)
    ]
    usage = EmbeddingUsage(
        prompt_tokens=tokens,
        total_tokens=tokens,
        credits=format_credits(units),
        credits_usd_reference=format_usd(units, credits_per_usd),
        estimated=estimated,
    )
    body = _encode(EmbeddingList(data=data, model=model, usage=usage))
    return body, tokens, units


def _encoded(vector: list[float]) -> str:
    """OpenAI's base64 form: the vector's little-endian float32 values."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
