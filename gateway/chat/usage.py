"""Usage as reported, estimated when missing, and the credit fields the gateway adds to it."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from gateway.billing.money import format_credits, format_usd
from gateway.billing.pricing import ChatPrice, estimate_prompt_tokens
from providers.base import Usage

__all__ = ["Charge", "charge_for", "credit_fields", "usage_fields"]

_ONE = Decimal(1)


class Charge:
    __slots__ = ("completion_tokens", "prompt_tokens", "units")

    def __init__(self, units: int, prompt_tokens: int, completion_tokens: int) -> None:
        self.units = units
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def charge_for(
    price: ChatPrice,
    usage: Usage | None,
    *,
    body_size: int,
    produced_chunks: int = 0,
    usage_body: dict[str, Any] | None = None,
) -> Charge:
    """The charge of one call. A stream cut short is charged from what its upstream reported
    so far (`usage.partial`: the prompt and cache counts, the output with the adapter's
    estimate of what it delivered since), and never below one token per output chunk
    delivered (reasoning included); without any report, the prompt is estimated from the
    request size. So a call that produced something is never free."""
    if usage is not None and (usage.prompt_tokens or usage.completion_tokens):
        prompt, completion = usage.prompt_tokens, usage.completion_tokens
        if usage.partial:
            prompt = prompt or estimate_prompt_tokens(body_size)
            completion = max(completion, produced_chunks)
    else:
        prompt, completion = estimate_prompt_tokens(body_size), produced_chunks
    body = usage_body or {}
    if price.reported_cost_units_per_usd is not None:
        reported = _reported_cost(body)
        if reported is not None:
            units = (reported * price.reported_cost_units_per_usd).quantize(
                _ONE, rounding=ROUND_HALF_UP
            )
            return Charge(int(units), prompt, completion)
    cached = usage.cached_tokens if usage is not None else 0
    written = usage.cache_creation_tokens if usage is not None else 0
    details = body.get("prompt_tokens_details")
    if isinstance(details, dict):
        if isinstance(details.get("cached_tokens"), int):
            cached = details["cached_tokens"]
        if isinstance(details.get("cache_creation_tokens"), int):
            written = details["cache_creation_tokens"]
    return Charge(price.charge_units(prompt, completion, cached, written), prompt, completion)


def _reported_cost(usage_body: dict[str, Any]) -> Decimal | None:
    """`usage.cost` in USD as some upstreams report it (a number or a numeric string)."""
    cost = usage_body.get("cost")
    if isinstance(cost, bool) or not isinstance(cost, int | float | str):
        return None
    try:
        value = Decimal(str(cost))
    except ArithmeticError:
        return None
    return value if value.is_finite() and value >= 0 else None


def usage_fields(usage_body: dict[str, Any], charge: Charge, rate: Decimal) -> dict[str, Any]:
    """The usage object the client sees: upstream's fields plus credits."""
    usage_body.setdefault("prompt_tokens", charge.prompt_tokens)
    usage_body.setdefault("completion_tokens", charge.completion_tokens)
    usage_body.setdefault("total_tokens", charge.prompt_tokens + charge.completion_tokens)
    usage_body["credits"] = format_credits(charge.units)
    usage_body["credits_usd_reference"] = format_usd(charge.units, rate)
    return usage_body


def credit_fields(charge: Charge, rate: Decimal) -> dict[str, str]:
    """The fields the gateway adds to any usage object: the charge in credits, and in USD."""
    return {
        "credits": format_credits(charge.units),
        "credits_usd_reference": format_usd(charge.units, rate),
    }
