"""Chat prices in credit units: the worst-case hold before a call and the charge after it.

charge credits = upstream USD (tokens x price table) x the model's markup (credits per USD).
The per-token rates are folded into units once per model, so a request costs two multiplications.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal

from gateway.billing.money import UNITS_PER_CREDIT, units_from_credits
from gateway.config.schema import ModelEntry, image_price

__all__ = ["ChatPrice", "estimate_prompt_tokens", "media_unit_price", "prompt_token_bound"]

_MILLION = Decimal(1_000_000)
_ONE = Decimal(1)


@dataclass(frozen=True, slots=True)
class ChatPrice:
    input_units_per_mtok: Decimal
    cached_input_units_per_mtok: Decimal
    output_units_per_mtok: Decimal

    @classmethod
    def of(cls, model: ModelEntry) -> ChatPrice:
        scale = model.markup * UNITS_PER_CREDIT
        pricing = model.pricing
        cached = pricing.cached_input_usd_per_mtok
        return cls(
            input_units_per_mtok=pricing.input_usd_per_mtok * scale,
            cached_input_units_per_mtok=(pricing.input_usd_per_mtok if cached is None else cached)
            * scale,
            output_units_per_mtok=pricing.output_usd_per_mtok * scale,
        )

    def hold_units(self, prompt_tokens: int, completion_tokens: int) -> int:
        """Worst case, rounded up: a hold must never be smaller than the charge it covers."""
        cost = prompt_tokens * self.input_units_per_mtok
        cost += completion_tokens * self.output_units_per_mtok
        return int((cost / _MILLION).to_integral_value(rounding=ROUND_CEILING))

    def charge_units(
        self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
    ) -> int:
        cached = min(max(cached_tokens, 0), prompt_tokens)
        cost = (prompt_tokens - cached) * self.input_units_per_mtok
        cost += cached * self.cached_input_units_per_mtok
        cost += completion_tokens * self.output_units_per_mtok
        return int((cost / _MILLION).quantize(_ONE, rounding=ROUND_HALF_UP))


def prompt_token_bound(body_size: int) -> int:
    """An upper bound of prompt tokens: byte-level tokenizers never make more tokens than bytes,
    and the JSON around each message outweighs its few template tokens."""
    return body_size


def estimate_prompt_tokens(body_size: int) -> int:
    """The usual ~4 bytes per token, for the tokens-per-minute reservation."""
    return body_size // 4 + 1


def media_unit_price(model: ModelEntry, capability: str, quality: str = "standard") -> int:
    """Units per image (image capabilities, by quality) or per task (music): prepaid media is
    debited `n` times this at creation, and refunded by the same unit."""
    pricing = model.pricing
    if capability.endswith("_music"):
        credits = pricing.credits_per_task
    else:
        credits = image_price(pricing, capability, quality)
    if credits is None:  # config loading makes sure every served capability has its price
        raise LookupError(f"{model.id} has no {capability} price at {quality} quality")
    return units_from_credits(credits)
