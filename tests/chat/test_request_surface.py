"""The OpenAI request surface as OpenAI accepts it: every field the openai SDK can send,
`temperature` with `top_p`, legacy function calling said as tools for the adapters (and the
answer said back), and refusals that name the field as the client sent it."""

from __future__ import annotations

import inspect
from typing import Any

import msgspec
import openai
import pytest

from gateway.chat.legacy_functions import to_legacy_chunk, to_legacy_completion
from gateway.chat.validation import check_chat_request
from gateway.errors import InvalidRequest
from gateway.http.json_body import OPTIONS_HINT, decode_json
from gateway.schemas.chat import ChatRequest

DECODER = msgspec.json.Decoder(ChatRequest)
USER = {"role": "user", "content": "hi"}
FUNCTION = {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}


def decoded(**fields: Any) -> ChatRequest:
    body = {"model": "m", "messages": [USER], **fields}
    return decode_json(
        msgspec.json.encode(body), DECODER, InvalidRequest, unknown_hint=OPTIONS_HINT
    )


def refused(request: ChatRequest) -> list[dict[str, str]]:
    with pytest.raises(InvalidRequest) as caught:
        check_chat_request(request)
    return [{"field": d.field, "message": d.message} for d in caught.value.details]


def test_every_field_the_sdk_can_send_is_a_field_of_the_request() -> None:
    sdk = openai.OpenAI(api_key="unused", base_url="http://127.0.0.1:9")
    sent = set(inspect.signature(sdk.chat.completions.create).parameters)
    sent -= {"extra_headers", "extra_query", "extra_body", "timeout"}
    assert sent <= set(ChatRequest.__struct_fields__), sent - set(ChatRequest.__struct_fields__)


def test_temperature_with_top_p_is_valid() -> None:
    request = decoded(temperature=0.7, top_p=0.9)
    assert check_chat_request(request) is request


def test_an_unknown_field_is_named_with_where_options_go() -> None:
    with pytest.raises(InvalidRequest) as caught:
        decoded(colour="blue")
    assert caught.value.message == f"colour: unknown field; {OPTIONS_HINT}"
    [detail] = caught.value.details
    assert (detail.field, detail.message) == ("colour", f"unknown field; {OPTIONS_HINT}")


class _Inner(msgspec.Struct, forbid_unknown_fields=True):
    size: int = 0


class _Outer(msgspec.Struct, forbid_unknown_fields=True):
    items: list[_Inner] = []


def test_a_nested_unknown_field_is_named_by_its_path_without_the_hint() -> None:
    body = b'{"items": [{"size": 1}, {"colour": 1}]}'
    with pytest.raises(InvalidRequest) as caught:
        decode_json(body, msgspec.json.Decoder(_Outer), InvalidRequest, unknown_hint=OPTIONS_HINT)
    [detail] = caught.value.details
    assert (detail.field, detail.message) == ("items[1].colour", "unknown field")


def test_type_errors_name_the_field_in_plain_words() -> None:
    with pytest.raises(InvalidRequest) as caught:
        decoded(messages=[USER, {"role": "user", "content": 5}])
    [detail] = caught.value.details
    assert detail.field == "messages[1].content"
    assert detail.message.startswith("expected a string or an array")


def test_legacy_functions_become_tools_and_tool_choice() -> None:
    request = decoded(functions=[FUNCTION], function_call={"name": "get_weather"})
    served = check_chat_request(request)
    assert served.functions is msgspec.UNSET and served.function_call is msgspec.UNSET
    body = msgspec.to_builtins(served)
    assert body["tools"] == [{"type": "function", "function": FUNCTION}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert check_chat_request(decoded(functions=[FUNCTION], function_call="auto")).tool_choice == (
        "auto"
    )


def test_legacy_history_becomes_tool_calls_and_tool_messages() -> None:
    messages = [
        USER,
        {"role": "assistant", "function_call": {"name": "get_weather", "arguments": "{}"}},
        {"role": "function", "name": "get_weather", "content": "sunny"},
    ]
    served = msgspec.to_builtins(check_chat_request(decoded(messages=messages)))
    call = served["messages"][1]["tool_calls"][0]
    assert "function_call" not in served["messages"][1]
    assert call["function"] == {"name": "get_weather", "arguments": "{}"}
    assert served["messages"][2] == {
        "role": "tool",
        "content": "sunny",
        "tool_call_id": call["id"],
    }


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        (
            {"functions": [FUNCTION], "tools": [{"type": "function", "function": FUNCTION}]},
            "functions",
        ),
        ({"functions": [FUNCTION], "function_call": {"name": "other"}}, "function_call.name"),
        ({"functions": [FUNCTION], "function_call": "required"}, "function_call"),
        ({"functions": [{**FUNCTION, "name": "bad name"}]}, "functions[0].name"),
        ({"messages": [USER, {"role": "function", "content": "x"}]}, "messages[1].name"),
    ],
)
def test_legacy_mistakes_are_named(fields: dict[str, Any], field: str) -> None:
    assert field in [d["field"] for d in refused(decoded(**fields))]


def test_answers_to_legacy_callers_say_function_call() -> None:
    completion = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
            }
        ]
    }
    to_legacy_completion(completion)
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "function_call"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "f", "arguments": "{}"},
    }
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]},
                "finish_reason": None,
            }
        ]
    }
    to_legacy_chunk(chunk)
    assert chunk["choices"][0]["delta"] == {"function_call": {"arguments": "{}"}}
