"""Each chat adapter's declared input rules (`providers.base.InputRules`) are at least what
its upstream's published rule bills (`tests.support.billing_rules`), for an image of any size,
for one whose size is unknown, and for a PDF page."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.anthropic.inputs import ANTHROPIC_INPUTS
from providers.base import InputRules
from providers.gemini.inputs import GEMINI_INPUTS
from providers.openai.inputs import OPENAI_UNKNOWN_MODEL, openai_input_rules
from providers.simulator.generator import SIMULATOR_INPUTS
from tests.support.billing_rules import (
    ANTHROPIC,
    GEMINI,
    OPENAI_4O_MINI,
    BillingRule,
    openai_tiles,
)

_GPT_4O = BillingRule(image=openai_tiles(85, 170), image_by_url=85 + 8 * 170, pdf_page=0)
CASES: list[tuple[str, InputRules, BillingRule]] = [
    ("anthropic", ANTHROPIC_INPUTS, ANTHROPIC),
    ("gemini", GEMINI_INPUTS, GEMINI),
    ("gpt-4o-mini", openai_input_rules("gpt-4o-mini-2024-07-18"), OPENAI_4O_MINI),
    ("gpt-4o", openai_input_rules("gpt-4o"), _GPT_4O),
    ("an unknown OpenAI model", OPENAI_UNKNOWN_MODEL, OPENAI_4O_MINI),
]


@pytest.mark.parametrize(("name", "declared", "published"), CASES)
@settings(max_examples=200, deadline=None, database=None)
@given(width=st.integers(1, 20_000), height=st.integers(1, 20_000))
def test_an_image_is_held_at_least_at_what_its_upstream_bills(
    name: str, declared: InputRules, published: BillingRule, width: int, height: int
) -> None:
    assert declared.image_tokens(width, height) >= published.image(width, height)
    assert declared.image_max_tokens >= published.image(width, height)


@pytest.mark.parametrize(("name", "declared", "published"), CASES)
def test_an_unknown_size_and_a_page_are_held_at_the_upstream_s_largest(
    name: str, declared: InputRules, published: BillingRule
) -> None:
    assert declared.image_max_tokens >= published.image_by_url
    assert declared.pdf_page_tokens >= published.pdf_page


def test_the_simulator_counts_85_a_part_whatever_it_holds() -> None:
    sizes: list[Callable[[int, int], int]] = [SIMULATOR_INPUTS.image_tokens]
    assert {rule(w, h) for rule in sizes for w, h in ((1, 1), (9000, 9000))} == {85}
    assert SIMULATOR_INPUTS.media_part_tokens == SIMULATOR_INPUTS.pdf_page_tokens == 85
