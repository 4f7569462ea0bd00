"""Chat prices in credit units: cache reads and writes, holds that cover them, reported costs."""

from __future__ import annotations

from decimal import Decimal

from gateway.billing.pricing import ChatPrice
from gateway.chat.usage import charge_for
from gateway.config.schema import ModelEntry, Pricing
from providers.base import Usage


def _price(**pricing: object) -> ChatPrice:
    model = ModelEntry(
        id="m", provider="p", capability="chat", markup=Decimal(1000), pricing=Pricing(**pricing)
    )
    return ChatPrice.of(model)


def test_cache_reads_and_writes_have_their_own_prices() -> None:
    price = _price(
        input_usd_per_mtok=Decimal(3),
        output_usd_per_mtok=Decimal(15),
        cached_input_usd_per_mtok=Decimal("0.3"),
        cache_write_usd_per_mtok=Decimal("3.75"),
    )
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=100_000, total_tokens=1_100_000)
    body = {"prompt_tokens_details": {"cached_tokens": 400_000, "cache_creation_tokens": 100_000}}
    charge = charge_for(price, usage, body_size=10, usage_body=body)
    # 500k input at $3, 400k cached at $0.30, 100k written at $3.75, 100k output at $15, x1000
    expected_usd = Decimal("1.5") + Decimal("0.12") + Decimal("0.375") + Decimal("1.5")
    assert charge.units == int(expected_usd * 1000 * 10_000)


def test_the_hold_covers_a_prompt_written_entirely_to_the_cache() -> None:
    price = _price(
        input_usd_per_mtok=Decimal(3),
        output_usd_per_mtok=Decimal(15),
        cache_write_usd_per_mtok=Decimal("3.75"),
    )
    hold = price.hold_units(10_000, 1_000)
    usage = Usage(prompt_tokens=10_000, completion_tokens=1_000, total_tokens=11_000)
    body = {"prompt_tokens_details": {"cache_creation_tokens": 10_000}}
    assert charge_for(price, usage, body_size=10, usage_body=body).units <= hold


def test_without_a_cache_write_price_writes_cost_the_input_price() -> None:
    price = _price(input_usd_per_mtok=Decimal(2), output_usd_per_mtok=Decimal(4))
    usage = Usage(prompt_tokens=1000, completion_tokens=0, total_tokens=1000)
    plain = charge_for(price, usage, body_size=10, usage_body={})
    written = charge_for(
        price,
        usage,
        body_size=10,
        usage_body={"prompt_tokens_details": {"cache_creation_tokens": 500}},
    )
    assert plain.units == written.units == 20_000


def test_a_reported_cost_is_charged_exactly_when_the_model_says_so() -> None:
    usage = Usage(prompt_tokens=1000, completion_tokens=1000, total_tokens=2000)
    tokens = _price(input_usd_per_mtok=Decimal(1), output_usd_per_mtok=Decimal(1))
    reported = _price(
        input_usd_per_mtok=Decimal(1), output_usd_per_mtok=Decimal(1), use_reported_cost=True
    )
    body = {"cost": 0.0123}
    assert charge_for(tokens, usage, body_size=10, usage_body=body).units == 20_000
    assert charge_for(reported, usage, body_size=10, usage_body=body).units == 123_000
    # no cost reported (or a malformed one): the tokens are priced
    assert charge_for(reported, usage, body_size=10, usage_body={"cost": "n/a"}).units == 20_000
    assert charge_for(reported, usage, body_size=10, usage_body={"cost": True}).units == 20_000
