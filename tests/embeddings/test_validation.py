"""The embeddings request's checks and its token bound: the estimate a call is charged without
usage never passes the bound its hold is priced from, so no charge passes its hold."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.billing.pricing import ChatPrice
from gateway.config.schema import ModelEntry, Pricing
from gateway.embeddings.validation import check_embeddings_request
from gateway.errors import InvalidRequest
from gateway.schemas.embeddings import EmbeddingsRequest

PRICE = ChatPrice.of(
    ModelEntry(
        id="e",
        provider="p",
        markup=Decimal(1200),
        pricing=Pricing(input_usd_per_mtok=Decimal("0.13")),
    )
)
TEXTS = st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=20)
TOKENS = st.lists(
    st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=50), min_size=1, max_size=20
)


@given(inputs=st.one_of(TEXTS, TOKENS, st.text(min_size=1)))
def test_the_estimate_and_any_capped_charge_stay_within_the_hold(inputs: Any) -> None:
    checked = check_embeddings_request(EmbeddingsRequest(model="m", input=inputs))
    assert 1 <= checked.estimate <= checked.bound
    hold = PRICE.hold_units(checked.bound, 0)
    assert PRICE.charge_units(checked.estimate, 0) <= hold
    assert PRICE.charge_units(checked.bound, 0) <= hold


def test_a_token_array_counts_exactly_and_text_by_bytes() -> None:
    assert check_embeddings_request(EmbeddingsRequest(model="m", input=[5, 6, 7])).bound == 3
    checked = check_embeddings_request(EmbeddingsRequest(model="m", input=["héllo"]))
    assert (checked.bound, checked.estimate) == (6, 2)


@pytest.mark.parametrize(
    ("value", "fields"),
    [
        ("", ["input"]),
        ([], ["input"]),
        (["a", ""], ["input[1]"]),
        ([1, -2], ["input[1]"]),
        ([[1], "a"], ["input[1]"]),
        ([{"a": 1}], ["input"]),
        (["a"] * 2049, ["input"]),
    ],
)
def test_each_problem_names_its_item(value: Any, fields: list[str]) -> None:
    with pytest.raises(InvalidRequest) as caught:
        check_embeddings_request(EmbeddingsRequest(model="m", input=value))
    assert [d.field for d in caught.value.details or []] == fields
