"""A Responses API body translated into the chat service's request: items, tools, tool_choice,
reasoning and structured output kept; reasoning items and built-in tools dropped; what needs
stored state refused naming the field."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from gateway.errors import InvalidRequest
from gateway.http.openai_responses.answer import signed_thinking
from gateway.http.openai_responses.request import (
    ResponsesTranslation,
    decode_responses,
    to_chat_request,
)

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}
PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
}


def translate(body: dict[str, Any]) -> ResponsesTranslation:
    request, _ = decode_responses(json.dumps({"model": "auto", **body}).encode())
    return to_chat_request(request)


def messages(translation: ResponsesTranslation) -> list[dict[str, Any]]:
    return list(msgspec.to_builtins(translation.chat)["messages"])


def refused(body: dict[str, Any]) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        translate(body)
    return caught.value


def test_instructions_and_a_string_input() -> None:
    out = translate({"instructions": "Be brief.", "input": "Hello"})
    assert messages(out) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
    ]


def test_a_conversation_of_items_becomes_chat_messages() -> None:
    image = "data:image/png;base64,iVBORw0KGgo="
    out = translate(
        {
            "input": [
                {"role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "Weather here?"},
                        {"type": "input_image", "image_url": image, "detail": "low"},
                    ],
                },
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
                },
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "get_weather",
                    "arguments": "{}",
                },
                {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "P"},
                {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
                {
                    "type": "custom_tool_call_output",
                    "call_id": "c2",
                    "output": [{"type": "input_text", "text": "applied"}],
                },
            ]
        }
    )
    assert messages(out) == [
        {"role": "developer", "content": "Rules."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather here?"},
                {"type": "image_url", "image_url": {"url": image, "detail": "low"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "apply_patch", "arguments": '{"input":"P"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "applied"},
    ]


def test_function_and_custom_tools_are_offered_and_built_in_ones_dropped() -> None:
    out = translate(
        {
            "input": "Hi",
            "tools": [WEATHER, PATCH, {"type": "web_search"}, {"type": "local_shell"}],
            "tool_choice": "auto",
            "parallel_tool_calls": False,
        }
    )
    chat = msgspec.to_builtins(out.chat)
    names = [tool["function"]["name"] for tool in chat["tools"]]
    assert names == ["get_weather", "apply_patch"]
    weather, patch = (tool["function"] for tool in chat["tools"])
    assert weather["strict"] is True and weather["parameters"] == WEATHER["parameters"]
    assert patch["parameters"]["required"] == ["input"]
    assert "start: /.+/" in patch["description"]
    assert chat["tool_choice"] == "auto" and chat["parallel_tool_calls"] is False
    assert out.names.custom == {"apply_patch"}
    assert out.dropped == ["web_search", "local_shell"]
    assert [tool["name"] for tool in out.echo["tools"]] == ["get_weather", "apply_patch"]


def test_only_built_in_tools_leave_no_tools_in_the_offer() -> None:
    out = translate({"input": "Hi", "tools": [{"type": "web_search"}], "tool_choice": "auto"})
    chat = msgspec.to_builtins(out.chat)
    assert "tools" not in chat and "tool_choice" not in chat
    assert out.dropped == ["web_search"]


@pytest.mark.parametrize(
    "choice",
    [{"type": "web_search"}, "required"],
    ids=["named", "required-with-only-built-ins"],
)
def test_a_tool_choice_forcing_a_dropped_tool_is_a_problem_naming_it(choice: object) -> None:
    out = translate({"input": "Hi", "tools": [{"type": "web_search"}], "tool_choice": choice})
    (problem,) = out.problems
    assert problem.field == "tool_choice" and "'web_search'" in problem.message
    assert "tool_choice" not in msgspec.to_builtins(out.chat)


def test_named_and_allowed_tool_choices() -> None:
    named = translate(
        {
            "input": "Hi",
            "tools": [WEATHER, PATCH],
            "tool_choice": {"type": "custom", "name": "apply_patch"},
        }
    )
    assert msgspec.to_builtins(named.chat)["tool_choice"] == {
        "type": "function",
        "function": {"name": "apply_patch"},
    }
    allowed = translate(
        {
            "input": "Hi",
            "tools": [WEATHER, PATCH],
            "tool_choice": {
                "type": "allowed_tools",
                "mode": "required",
                "tools": [{"type": "function", "name": "get_weather"}],
            },
        }
    )
    chat = msgspec.to_builtins(allowed.chat)
    assert [t["function"]["name"] for t in chat["tools"]] == ["get_weather"]
    assert chat["tool_choice"] == "required"


def test_reasoning_structured_output_and_sampling() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    out = translate(
        {
            "input": "Hi",
            "reasoning": {"effort": "high", "summary": "auto"},
            "text": {
                "format": {"type": "json_schema", "name": "A", "schema": schema, "strict": True}
            },
            "max_output_tokens": 300,
            "temperature": 0.5,
            "top_p": 0.9,
            "metadata": {"k": "v"},
            "user": "u1",
            "store": True,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "p",
        }
    )
    chat = msgspec.to_builtins(out.chat)
    assert chat["reasoning_effort"] == "high"
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "A", "schema": schema, "strict": True},
    }
    assert chat["max_completion_tokens"] == 300
    assert (chat["temperature"], chat["top_p"], chat["user"]) == (0.5, 0.9, "u1")
    assert chat["metadata"] == {"k": "v"} and chat["prompt_cache_key"] == "p"
    assert "store" not in chat  # the upstream never keeps what the gateway was asked to
    assert out.echo["store"] is True and out.echo["max_output_tokens"] == 300


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"background": True}, "background"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
        ({"input": [{"type": "computer_call", "id": "x"}]}, "input[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input[0].content[0].type",
        ),
    ],
)
def test_what_only_passthrough_serves_is_a_problem_naming_the_field(
    body: dict[str, Any], field: str
) -> None:
    out = translate({"input": "Hi", **body})
    assert [problem.field for problem in out.problems] == [field]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": {"format": {"type": "yaml"}}}, "text.format.type"),
        ({"tools": [{"type": "function", "name": "bad name"}]}, "tools[0].name"),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}},
            "tool_choice.name",
        ),
        ({"temperature": 3}, "temperature"),
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
    ],
)
def test_refusals_name_the_field(body: dict[str, Any], field: str) -> None:
    error = refused({"input": "Hi", **body})
    assert error.details[0].field == field


def test_a_namespaces_tools_are_offered_flat_and_answer_in_their_namespace() -> None:
    agents = {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "Sub-agents",
        "tools": [{**WEATHER, "name": "spawn_agent"}],
    }
    out = translate(
        {
            "input": [
                {"role": "user", "content": "Go"},
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "spawn_agent",
                    "namespace": "multi_agent_v1",
                    "arguments": "{}",
                },
                {"type": "function_call_output", "call_id": "c1", "output": "spawned"},
            ],
            "tools": [agents],
        }
    )
    chat = msgspec.to_builtins(out.chat)
    assert [t["function"]["name"] for t in chat["tools"]] == ["multi_agent_v1__spawn_agent"]
    assert chat["messages"][1]["tool_calls"][0]["function"]["name"] == (
        "multi_agent_v1__spawn_agent"
    )
    assert out.names.namespaced == {
        "multi_agent_v1__spawn_agent": ("multi_agent_v1", "spawn_agent")
    }
    assert out.dropped == [] and out.echo["tools"] == [agents]


def test_the_gateways_signed_thinking_comes_back_as_thinking_blocks() -> None:
    blocks = [{"type": "thinking", "thinking": "Hmm.", "signature": "sig-1"}]
    own = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": ""}
    own["encrypted_content"] = signed_thinking(blocks)
    foreign = {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA"}
    call = {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"}
    out = translate(
        {
            "input": [
                {"role": "user", "content": "Weather?"},
                own,
                call,
                {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
                foreign,
                {"role": "assistant", "content": "It is sunny."},
                own,
                {"role": "user", "content": "Thanks"},
            ]
        }
    )
    assistant, final = (m for m in messages(out) if m["role"] == "assistant")
    assert assistant["thinking_blocks"] == blocks and assistant["tool_calls"][0]["id"] == "c1"
    assert "thinking_blocks" not in final  # another upstream's reasoning is not sent
    assert "gAAAA" not in json.dumps(messages(out))
    assert messages(out)[-1] == {"role": "user", "content": "Thanks"}
