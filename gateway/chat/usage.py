"""Usage as reported, the delivered output counted, the charge, and the credit fields the
gateway adds to the usage object.

One rule for every upstream (docs/api.md, "Money"): the upstream's counts are charged when they
are usable; output it did not count (absent, zero, malformed, or a stream cut before its final
report) is counted from what the gateway delivered, a token per 4 characters of output (text,
reasoning, refusal, tool-call names and arguments), rounded up, and never less than one token
per output chunk; a prompt it did not count is estimated from the request's size.

    output   complete call, reported > 0       reported
             otherwise                         max(reported, ceil(chars / 4), chunks),
                                               the estimate at most the output asked for
    prompt   reported > 0                      reported
             otherwise                         body bytes / 4 + 1
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

from gateway.billing.money import format_credits, format_usd
from gateway.billing.pricing import ChatPrice, estimate_prompt_tokens
from providers.base import Usage

if TYPE_CHECKING:
    from gateway.chat.plan import ChatPlan
    from gateway.routing.route import Route

__all__ = ["Charge", "Delivered", "charge_for", "credit_fields", "output_limit", "usage_fields"]

_ONE = Decimal(1)
_CHARS_PER_TOKEN = 4


class Delivered:
    """The output a call handed out: its characters, and the chunks that carried any."""

    __slots__ = ("chars", "chunks")

    def __init__(self) -> None:
        self.chars = 0
        self.chunks = 0

    def add_delta(self, delta: dict[str, Any]) -> bool:
        """Counts one chunk's delta; whether it carried output."""
        chars = _output_chars(delta)
        if chars:
            self.chars += chars
            self.chunks += 1
            return True
        return False

    def add_completion(self, body: dict[str, Any]) -> None:
        """Counts a whole answer's messages (no chunks)."""
        for choice in body.get("choices") or ():
            message = choice.get("message") if type(choice) is dict else None
            if type(message) is dict:
                self.chars += _output_chars(message)

    def tokens(self) -> int:
        return max(-(-self.chars // _CHARS_PER_TOKEN), self.chunks)


def _output_chars(part: dict[str, Any]) -> int:
    """Characters of output in a delta or a message: text, reasoning (`reasoning_content`, or
    `reasoning` as some servers name it, once if both), refusal, tool-call names and
    arguments."""
    content = part.get("content")
    if len(part) == 1 and type(content) is str:  # most of a stream's deltas: text alone
        return len(content)
    chars = _length(content) + _length(part.get("refusal"))
    chars += max(_length(part.get("reasoning_content")), _length(part.get("reasoning")))
    calls = part.get("tool_calls")
    if type(calls) is list:
        for call in calls:
            function = call.get("function") if type(call) is dict else None
            if type(function) is dict:
                chars += _length(function.get("name")) + _length(function.get("arguments"))
    return chars


def _length(value: object) -> int:
    return len(value) if type(value) is str else 0


_NOTHING = Delivered()


class Charge:
    __slots__ = ("completion_tokens", "estimated", "prompt_tokens", "units")

    def __init__(
        self, units: int, prompt_tokens: int, completion_tokens: int, *, estimated: bool = False
    ) -> None:
        self.units = units
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.estimated = estimated
        """Some of the counts are the gateway's (the upstream did not give them usably)."""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def charge_for(
    price: ChatPrice,
    usage: Usage | None,
    *,
    body_size: int,
    delivered: Delivered = _NOTHING,
    complete: bool = True,
    limit: int | None = None,
    usage_body: dict[str, Any] | None = None,
) -> Charge:
    """The charge of one call by the module's rule. `usage`: what the upstream reported (so
    far, `partial`, for a stream cut short); `delivered`: the output handed out; `complete`:
    the call ended properly (a whole answer, a stream to its end); `limit`: the most output
    the upstream was asked for (`output_limit`), which an estimate never passes (a token of
    more than 4 characters would otherwise take the estimate past the hold)."""
    reported_prompt = max(usage.prompt_tokens, 0) if usage is not None else 0
    reported_output = max(usage.completion_tokens, 0) if usage is not None else 0
    estimated = False
    if complete and reported_output > 0 and usage is not None and not usage.partial:
        completion = reported_output
    else:
        counted = delivered.tokens()
        if limit is not None:
            counted = min(counted, limit)
        completion = max(reported_output, counted)
        estimated = completion > reported_output
    if reported_prompt > 0:
        prompt = reported_prompt
    else:
        prompt, estimated = estimate_prompt_tokens(body_size), True
    body = usage_body or {}
    if price.reported_cost_units_per_usd is not None:
        reported = _reported_cost(body)
        if reported is not None:
            units = (reported * price.reported_cost_units_per_usd).quantize(
                _ONE, rounding=ROUND_HALF_UP
            )
            return Charge(int(units), prompt, completion, estimated=estimated)
    cached = usage.cached_tokens if usage is not None else 0
    written = usage.cache_creation_tokens if usage is not None else 0
    details = body.get("prompt_tokens_details")
    if isinstance(details, dict):
        if _is_count(details.get("cached_tokens")):
            cached = details["cached_tokens"]
        if _is_count(details.get("cache_creation_tokens")):
            written = details["cache_creation_tokens"]
    charged = price.charge_units(prompt, completion, cached, written)
    return Charge(charged, prompt, completion, estimated=estimated)


def output_limit(plan: ChatPlan, route: Route) -> int:
    """The most output `route`'s upstream was asked for: its completion limit per choice (as
    lowered to the route's limit or to what a wallet-bounded hold pays for), times the choices."""
    n = plan.request.n
    return plan.max_tokens_for(route) * (n if isinstance(n, int) else 1)


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


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
    """The usage object the client sees: upstream's fields plus credits; counts the gateway
    made itself replace the upstream's and say so (`estimated: true`)."""
    if charge.estimated:
        usage_body["prompt_tokens"] = charge.prompt_tokens
        usage_body["completion_tokens"] = charge.completion_tokens
        usage_body["total_tokens"] = charge.prompt_tokens + charge.completion_tokens
        usage_body["estimated"] = True
    else:
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
