"""Chat request checks that the OpenAPI document also states as JSON Schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.chat.validation import check_chat_request
from gateway.errors import InvalidRequest
from gateway.schemas.chat import ChatRequest
from tests.chat.support import decode_chat_body


def parse_chat_request(body: bytes) -> ChatRequest:
    request = decode_chat_body(body)
    check_chat_request(request)
    return request


def _with_tool(name: str) -> bytes:
    body: dict[str, Any] = {
        "model": "auto",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": name}}],
    }
    return json.dumps(body).encode()


@pytest.mark.parametrize("name", ["get_weather\n", "a b", "", "x" * 65, "naïve"])
def test_a_function_name_outside_the_documented_pattern_is_refused(name: str) -> None:
    # In the documented pattern (ECMA-262) "$" ends the string: a trailing newline breaks it.
    # Python's `re.match` with the same pattern took one.
    with pytest.raises(InvalidRequest) as refused:
        parse_chat_request(_with_tool(name))
    assert refused.value.details[0].field == "tools[0].function.name"


def test_a_function_name_inside_the_pattern_is_accepted() -> None:
    request = parse_chat_request(_with_tool("get_weather-2"))
    assert request.tools and request.tools[0].function.name == "get_weather-2"
