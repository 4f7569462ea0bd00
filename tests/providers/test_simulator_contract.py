"""The simulator honours the request as a model would: JSON output (`json_object`, and a value
valid against a `json_schema`), `n` choices, `tool_choice`, tools without parameters, and text
after a tool result so that agent loops end; streams join into the same answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any, Literal

import jsonschema
import pytest
from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel

from providers.simulator import Options, create
from providers.simulator.schema_values import schema_value


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def request(content: str = "Plan a trip.", **extra: Any) -> dict[str, Any]:
    return {
        "model": "sim-upstream",
        "messages": [{"role": "user", "content": content}],
        "max_completion_tokens": 4000,
        **extra,
    }


def schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}}


async def streamed(body: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """The chunks of a streamed call, and each choice's joined content."""
    provider = create("sim", Options())
    stream = await provider.stream(
        {**body, "stream": True, "stream_options": {"include_usage": True}}
    )
    chunks = [chunk async for chunk in stream]
    contents: dict[int, str] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            piece = choice["delta"].get("content") or ""
            contents[choice["index"]] = contents.get(choice["index"], "") + piece
    return chunks, contents


class Stop(BaseModel):
    city: str
    nights: int
    rating: float
    kind: Literal["hotel", "camp", "hostel"]


class Leg(BaseModel):
    origin: Stop
    destination: Stop | None
    notes: list[str]


class Node(BaseModel):
    label: str
    children: list[Node]


class Trip(BaseModel):
    title: str
    legs: list[Leg]
    booked: bool
    tree: Node


HAND_WRITTEN: list[dict[str, Any]] = [
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}},
    {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "mail": {"type": "string", "format": "email"},
            "code": {"type": "string", "minLength": 12, "maxLength": 14},
            "count": {"type": "integer", "minimum": 10, "maximum": 12},
            "even": {"type": "integer", "multipleOf": 2, "exclusiveMinimum": 5},
            "share": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "level": {"const": "max"},
            "mixed": {"type": ["integer", "null"]},
        },
        "required": ["when", "day", "mail", "code", "count", "even", "share", "level", "mixed"],
        "additionalProperties": False,
    },
    {
        "type": "array",
        "items": {"enum": ["a", "b", "c", 1, None]},
        "minItems": 2,
        "maxItems": 3,
        "uniqueItems": True,
    },
    {
        "$defs": {"leaf": {"type": "object", "properties": {"v": {"type": "boolean"}}}},
        "anyOf": [{"$ref": "#/$defs/leaf"}, {"type": "null"}],
    },
    {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"type": "string"}}, "required": ["b"]},
        ]
    },
    {
        "definitions": {
            "list": {
                "type": "object",
                "properties": {
                    "head": {"type": "integer"},
                    "tail": {"anyOf": [{"$ref": "#/definitions/list"}, {"type": "null"}]},
                },
                "required": ["head", "tail"],
            }
        },
        "$ref": "#/definitions/list",
    },
    {
        "type": "object",
        "properties": {
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "items": False,
                "minItems": 2,
            }
        },
    },
]

SCHEMAS = [to_strict_json_schema(Trip), to_strict_json_schema(Leg), *HAND_WRITTEN]


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_generated_values_are_valid_against_their_schema(schema: dict[str, Any]) -> None:
    words = tuple(f"w{i}" for i in range(256))
    for seed in range(40):
        value = schema_value(schema, seed.to_bytes(4, "big"), words)
        jsonschema.validate(value, schema)


@pytest.mark.parametrize("schema", SCHEMAS[:3], ids=range(3))
def test_json_schema_answers_are_valid_json_of_the_schema_also_streamed(
    schema: dict[str, Any],
) -> None:
    async def test() -> None:
        provider = create("sim", Options())
        body = request(response_format=schema_format(schema), n=2)
        completion = await provider.complete(body)
        for choice in completion.body["choices"]:
            assert choice["finish_reason"] == "stop"
            jsonschema.validate(json.loads(choice["message"]["content"]), schema)
        chunks, contents = await streamed(body)
        assert [contents[i] for i in range(2)] == [
            c["message"]["content"] for c in completion.body["choices"]
        ]
        assert chunks[-1]["usage"]["completion_tokens"] == completion.usage.completion_tokens

    run(test)


def test_json_object_answers_are_json_objects() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        for prompt in ("one", "two", "three"):
            body = request(prompt, response_format={"type": "json_object"})
            completion = await provider.complete(body)
            assert isinstance(json.loads(completion.body["choices"][0]["message"]["content"]), dict)
            _, contents = await streamed(body)
            assert isinstance(json.loads(contents[0]), dict)

    run(test)


def test_a_json_answer_cut_by_max_tokens_says_length() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        body = request(response_format=schema_format(SCHEMAS[0]), max_completion_tokens=3)
        choice = (await provider.complete(body)).body["choices"][0]
        assert choice["finish_reason"] == "length"
        assert len(choice["message"]["content"]) <= 12

    run(test)


def test_n_choices_each_with_its_own_answer_and_usage_summed() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        completion = await provider.complete(request(n=3))
        choices = completion.body["choices"]
        assert [c["index"] for c in choices] == [0, 1, 2]
        texts = [c["message"]["content"] for c in choices]
        assert len(set(texts)) == 3
        single = await provider.complete(request())
        assert single.body["choices"][0]["message"]["content"] == texts[0]
        words = sum(len(t.split()) for t in texts)
        assert completion.usage.completion_tokens == words
        chunks, contents = await streamed(request(n=3))
        assert [contents[i] for i in range(3)] == texts
        finishes = [
            c["choices"][0]["index"]
            for c in chunks
            if c["choices"] and c["choices"][0]["finish_reason"]
        ]
        assert sorted(finishes) == [0, 1, 2]
        assert chunks[-1]["usage"]["completion_tokens"] == words

    run(test)


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
CLOCK = {"type": "function", "function": {"name": "get_time"}}
EMPTY = {"type": "function", "function": {"name": "ping", "parameters": {}}}


def _call(completion: dict[str, Any]) -> dict[str, Any] | None:
    calls = completion["choices"][0]["message"].get("tool_calls")
    return calls[0]["function"] if calls else None


def test_tool_choice_none_auto_required_and_named() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        tools = [WEATHER, CLOCK]
        none = (await provider.complete(request(tools=tools, tool_choice="none"))).body
        assert _call(none) is None and none["choices"][0]["finish_reason"] == "stop"
        auto = (await provider.complete(request(tools=tools))).body
        assert auto["choices"][0]["finish_reason"] == "tool_calls"
        assert _call(auto) is not None
        named = {"type": "function", "function": {"name": "get_time"}}
        forced = (await provider.complete(request(tools=tools, tool_choice=named))).body
        assert _call(forced) == {"name": "get_time", "arguments": "{}"}
        required = (await provider.complete(request(tools=tools, tool_choice="required"))).body
        assert _call(required) is not None

    run(test)


@pytest.mark.parametrize("tool", [CLOCK, EMPTY])
def test_a_tool_without_parameters_gets_empty_arguments(tool: dict[str, Any]) -> None:
    async def test() -> None:
        provider = create("sim", Options())
        completion = (await provider.complete(request(tools=[tool]))).body
        assert _call(completion) == {"name": tool["function"]["name"], "arguments": "{}"}

    run(test)


def test_after_a_tool_result_auto_answers_in_text_and_required_calls_another_tool() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        first = (await provider.complete(request(tools=[WEATHER]))).body
        call = first["choices"][0]["message"]["tool_calls"][0]
        arguments = json.loads(call["function"]["arguments"])
        assert set(arguments) == {"city", "unit"} and arguments["unit"] in ("c", "f")
        history = [
            {"role": "user", "content": "Plan a trip."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
        ]
        second = (await provider.complete({**request(tools=[WEATHER]), "messages": history})).body
        assert second["choices"][0]["finish_reason"] == "stop"
        assert second["choices"][0]["message"]["content"]
        tools = [WEATHER, CLOCK]
        body = {**request(tools=tools, tool_choice="required"), "messages": history}
        again = (await provider.complete(body)).body
        assert _call(again) == {"name": "get_time", "arguments": "{}"}

    run(test)


def test_a_streamed_tool_call_has_the_complete_call_arguments() -> None:
    async def test() -> None:
        chunks, _ = await streamed(request(tools=[WEATHER]))
        first = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
        arguments = "".join(
            c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
            for c in chunks[1:]
            if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
        )
        assert first["function"]["name"] == "get_weather"
        assert set(json.loads(arguments)) == {"city", "unit"}

    run(test)
