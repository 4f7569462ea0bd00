"""A stream that broke off is charged from what its upstream reported so far (`Usage.partial`),
not from a guess at the request's size; without any report, from the guess."""

from __future__ import annotations

from decimal import Decimal

from gateway.billing.pricing import ChatPrice
from gateway.chat.usage import charge_for
from gateway.config.schema import ModelEntry, Pricing
from providers.base import Usage

SONNET = ChatPrice.of(
    ModelEntry(
        id="claude",
        provider="claude",
        capability="chat",
        markup=Decimal(1000),
        pricing=Pricing(
            input_usd_per_mtok=Decimal(3),
            output_usd_per_mtok=Decimal(15),
            cached_input_usd_per_mtok=Decimal("0.3"),
            cache_write_usd_per_mtok=Decimal("3.75"),
        ),
    )
)
UNITS_PER_CREDIT = 10_000


def test_the_reported_prompt_is_charged_not_the_request_size() -> None:
    reported = Usage(prompt_tokens=424, completion_tokens=12, total_tokens=436, partial=True)
    charge = charge_for(SONNET, reported, body_size=1_800, produced_chunks=5)
    # 424 x $3 + 12 x $15 per million tokens, 1000 credits per USD: 1.2720 + 0.1800
    assert charge.units == int(Decimal("1.4520") * UNITS_PER_CREDIT)
    assert (charge.prompt_tokens, charge.completion_tokens) == (424, 12)


def test_cache_reads_and_writes_reported_so_far_keep_their_prices() -> None:
    reported = Usage(
        prompt_tokens=3 + 1111 + 418,
        completion_tokens=1,
        total_tokens=1533,
        cached_tokens=1111,
        cache_creation_tokens=418,
        partial=True,
    )
    charge = charge_for(SONNET, reported, body_size=6_000, produced_chunks=0)
    # 3 x $3 + 1111 x $0.30 + 418 x $3.75 + 1 x $15, per million tokens, x1000: 1.9248
    expected = (9 + Decimal("333.3") + Decimal("1567.5") + 15) / 1000
    assert charge.units == int((expected * UNITS_PER_CREDIT).quantize(Decimal(1)))


def test_output_is_never_below_one_token_per_chunk_delivered() -> None:
    reported = Usage(prompt_tokens=43, completion_tokens=1, total_tokens=44, partial=True)
    charge = charge_for(SONNET, reported, body_size=500, produced_chunks=30)
    assert charge.completion_tokens == 30
    final = Usage(prompt_tokens=43, completion_tokens=1, total_tokens=44)
    assert charge_for(SONNET, final, body_size=500, produced_chunks=30).completion_tokens == 1


def test_without_a_report_the_request_size_is_the_guess() -> None:
    charge = charge_for(SONNET, None, body_size=400, produced_chunks=7)
    assert (charge.prompt_tokens, charge.completion_tokens) == (101, 7)
    output_only = Usage(completion_tokens=66, total_tokens=66, partial=True)
    charge = charge_for(SONNET, output_only, body_size=400, produced_chunks=7)
    assert (charge.prompt_tokens, charge.completion_tokens) == (101, 66)
