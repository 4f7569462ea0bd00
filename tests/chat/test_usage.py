"""What a stream delivered, counted delta by delta: text, reasoning, refusal and tool calls,
whatever else a delta carries."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.chat.usage import Delivered


@pytest.mark.parametrize(
    ("delta", "chars"),
    [
        ({"content": "Hello"}, 5),
        ({"content": ""}, 0),
        ({"content": None}, 0),
        ({"content": 42}, 0),
        ({"role": "assistant", "content": "Hi"}, 2),
        ({"content": "ab", "refusal": "no"}, 4),
        ({"content": "ab", "reasoning_content": "think", "reasoning": "thi"}, 7),
        ({"reasoning": "thi"}, 3),
        (
            {
                "content": "x",
                "tool_calls": [{"function": {"name": "get", "arguments": '{"a":1}'}}, "bad"],
            },
            11,
        ),
        ({}, 0),
    ],
)
def test_a_delta_counts_its_output_characters(delta: dict[str, Any], chars: int) -> None:
    delivered = Delivered()
    assert delivered.add_delta(delta) is (chars > 0)
    assert (delivered.chars, delivered.chunks) == (chars, 1 if chars else 0)
