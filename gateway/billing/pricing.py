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
    cache_write_units_per_mtok: Decimal | None = None
    """None: cache writes cost the input price."""
    reported_cost_units_per_usd: Decimal | None = None
    """Set when the model is charged by the cost its upstream reports: units per USD."""

    @classmethod
    def of(cls, model: ModelEntry) -> ChatPrice:
        scale = model.markup * UNITS_PER_CREDIT
        pricing = model.pricing
        cached = pricing.cached_input_usd_per_mtok
        writes = pricing.cache_write_usd_per_mtok
        return cls(
            input_units_per_mtok=pricing.input_usd_per_mtok * scale,
            cached_input_units_per_mtok=(pricing.input_usd_per_mtok if cached is None else cached)
            * scale,
            output_units_per_mtok=pricing.output_usd_per_mtok * scale,
            cache_write_units_per_mtok=None if writes is None else writes * scale,
            reported_cost_units_per_usd=scale if pricing.use_reported_cost else None,
        )

    def hold_units(self, prompt_tokens: int, completion_tokens: int) -> int:
        """Worst case, rounded up: a hold must never be smaller than the token charge it covers
        (every prompt token at the dearer of the input and cache-write prices)."""
        per_prompt_token = self.input_units_per_mtok
        if self.cache_write_units_per_mtok is not None:
            per_prompt_token = max(per_prompt_token, self.cache_write_units_per_mtok)
        cost = prompt_tokens * per_prompt_token
        cost += completion_tokens * self.output_units_per_mtok
        return int((cost / _MILLION).to_integral_value(rounding=ROUND_CEILING))

    def charge_units(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> int:
        """Prompt tokens read from the cache at the cached price, written to it at the
        cache-write price, the rest at the input price; half-up to whole units."""
        cached = min(max(cached_tokens, 0), prompt_tokens)
        written = min(max(cache_write_tokens, 0), prompt_tokens - cached)
        cost = (prompt_tokens - cached - written) * self.input_units_per_mtok
        cost += cached * self.cached_input_units_per_mtok
        if written:
            rate = self.cache_write_units_per_mtok
            cost += written * (self.input_units_per_mtok if rate is None else rate)
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
