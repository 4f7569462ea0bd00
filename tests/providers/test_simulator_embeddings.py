"""The simulator's embeddings: deterministic unit vectors, `dimensions` a renormalized prefix,
token counts the bound never undercuts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.errors import UpstreamRejectedRequest
from providers.simulator.embeddings import DIMENSIONS, embed


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(v * v for v in vector))


@given(text=st.text(min_size=1, max_size=200), size=st.integers(1, DIMENSIONS))
def test_vectors_are_unit_deterministic_and_cut_then_renormalized(text: str, size: int) -> None:
    full = embed({"model": "sim-embed-1", "input": [text]})
    again = embed({"model": "sim-embed-1", "input": [text]})
    cut = embed({"model": "sim-embed-1", "input": [text], "dimensions": size})
    vector = full.vectors[0]
    assert again.vectors == full.vectors
    assert len(vector) == DIMENSIONS and _norm(vector) == pytest.approx(1.0)
    assert len(cut.vectors[0]) == size and _norm(cut.vectors[0]) == pytest.approx(1.0)
    scale = _norm(vector[:size])
    assert cut.vectors[0] == pytest.approx([v / scale for v in vector[:size]], abs=1e-9)
    # What it reports never passes the bound the gateway holds for (a text's UTF-8 bytes).
    assert full.prompt_tokens is not None
    assert 1 <= full.prompt_tokens <= len(text.encode())


def test_another_model_or_input_gives_another_vector() -> None:
    one = embed({"model": "sim-embed-1", "input": ["a", [1, 2, 3]]})
    other = embed({"model": "sim-embed-2", "input": ["a"]})
    assert one.vectors[0] != one.vectors[1]
    assert other.vectors[0] != one.vectors[0]
    assert one.prompt_tokens == 1 + 3


@pytest.mark.parametrize("dimensions", [0, DIMENSIONS + 1])
def test_a_size_it_does_not_give_is_refused_naming_dimensions(dimensions: int) -> None:
    with pytest.raises(UpstreamRejectedRequest) as caught:
        embed({"model": "sim-embed-1", "input": ["a"], "dimensions": dimensions})
    assert caught.value.field == "dimensions"
