"""The arithmetic of a wallet-bounded hold (`ChatPlan.min_hold_units`, `.hold_granted`), for any
prices, prompt, output limit and choices: the minimum covers the prompt and the first
`MIN_HELD_OUTPUT_TOKENS`, and whatever hold between the minimum and the whole is granted, the
output tokens asked of the upstream are paid for by it (their hold and their charge fit)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.billing.money import UNITS_PER_CREDIT
from gateway.billing.pricing import ChatPrice
from gateway.chat.plan import MIN_HELD_OUTPUT_TOKENS, ChatPlan
from gateway.schemas.chat import ChatMessage, ChatRequest

USD_PER_MTOK = st.decimals(min_value=0, max_value=150, places=3)


def _plan(price: ChatPrice, prompt: int, completion: int, choices: int) -> ChatPlan:
    request = ChatRequest(model="m", messages=[ChatMessage(role="user", content="hi")])
    return ChatPlan(
        request=request,
        choice=cast(Any, None),
        routes=(),
        upstream_body={"max_completion_tokens": completion},
        stream=False,
        include_usage=False,
        requested=completion,
        tokens_reserved=prompt // 4 + completion * choices,
        hold_units=price.hold_units(prompt, completion * choices),
        completion_tokens=completion,
        choices=choices,
        output_units_per_mtok=price.output_units_per_mtok,
    )


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(
    input_usd=USD_PER_MTOK,
    output_usd=USD_PER_MTOK.filter(lambda usd: usd > 0),
    markup=st.sampled_from([Decimal(1), Decimal(1000), Decimal("1234.5")]),
    prompt=st.integers(min_value=0, max_value=200_000),
    completion=st.integers(min_value=1, max_value=64_000),
    choices=st.integers(min_value=1, max_value=4),
    where=st.floats(min_value=0, max_value=1),
)
def test_any_granted_hold_pays_for_the_output_it_asks(
    input_usd: Decimal,
    output_usd: Decimal,
    markup: Decimal,
    prompt: int,
    completion: int,
    choices: int,
    where: float,
) -> None:
    scale = markup * UNITS_PER_CREDIT
    price = ChatPrice(
        input_units_per_mtok=input_usd * scale,
        cached_input_units_per_mtok=input_usd * scale,
        output_units_per_mtok=output_usd * scale,
    )
    plan = _plan(price, prompt, completion, choices)
    floor = min(completion, MIN_HELD_OUTPUT_TOKENS)
    least = plan.min_hold_units()
    assert price.hold_units(prompt, floor * choices) <= least <= plan.hold_units
    assert plan.min_tokens_reserved() == prompt // 4 + floor * choices

    granted = least + int((plan.hold_units - least) * where)
    plan.hold_granted(granted)
    if granted >= plan.hold_units:
        assert plan.paid_tokens is None
        return
    paid = plan.paid_tokens
    assert paid is not None and floor <= paid < completion
    assert plan.upstream_body["max_completion_tokens"] == paid
    assert price.hold_units(prompt, paid * choices) <= granted
    assert price.charge_units(prompt, paid * choices) <= granted
