from __future__ import annotations

from decimal import Decimal

import pytest

from gateway.billing.money import format_credits, format_usd, parse_credits, units_from_credits
from gateway.billing.pricing import ChatPrice
from gateway.config.schema import ModelEntry, Pricing


def test_units_round_trip_at_four_decimals() -> None:
    assert parse_credits("50") == 500_000
    assert format_credits(500_000) == "50.0000"
    assert format_credits(-1) == "-0.0001"
    assert parse_credits("0.0001") == 1
    assert units_from_credits(Decimal("0.00005")) == 1  # half up


@pytest.mark.parametrize("text", ["abc", "1.00001", "nan", "inf", ""])
def test_bad_amounts_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_credits(text)


def test_usd_reference() -> None:
    assert format_usd(10_000_000, Decimal(1000)) == "1.0000"


def test_chat_price_hold_covers_the_charge() -> None:
    model = ModelEntry(
        id="m",
        provider="p",
        capability="chat",
        markup=Decimal(1200),
        pricing=Pricing(input_usd_per_mtok=Decimal("0.5"), output_usd_per_mtok=Decimal("1.5")),
    )
    price = ChatPrice.of(model)
    # 1000 prompt + 500 completion tokens: (1000 x 0.5 + 500 x 1.5) / 1e6 USD x 1200 = 1.5 credits
    assert price.charge_units(1000, 500) == 15_000
    assert price.hold_units(1000, 500) == 15_000
    assert price.hold_units(1, 0) == 6  # 0.5e-6 USD x 1200 = 0.0006 credits


def test_hold_rounds_up_and_charge_rounds_half_up() -> None:
    model = ModelEntry(
        id="m",
        provider="p",
        capability="chat",
        markup=Decimal(1),
        pricing=Pricing(input_usd_per_mtok=Decimal("0.5"), output_usd_per_mtok=Decimal(0)),
    )
    price = ChatPrice.of(model)
    assert price.hold_units(1, 0) == 1  # 0.005 units: a hold never rounds down to zero
    assert price.charge_units(1, 0) == 0
    assert price.charge_units(100, 0) == 1  # 0.5 units, half up


def test_cached_prompt_tokens_use_the_cached_price() -> None:
    model = ModelEntry(
        id="m",
        provider="p",
        capability="chat",
        markup=Decimal(1000),
        pricing=Pricing(
            input_usd_per_mtok=Decimal(2),
            output_usd_per_mtok=Decimal(0),
            cached_input_usd_per_mtok=Decimal(1),
        ),
    )
    assert ChatPrice.of(model).charge_units(1000, 0, cached_tokens=400) == 16_000
