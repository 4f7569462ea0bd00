"""The simulator: deterministic answers in OpenAI shapes, directives, pacing, closing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import msgspec
import pytest

from providers.base import ChatProvider
from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.registry import spec_for
from providers.simulator import Options, create


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def body(content: str = "Name three colours.", **extra: Any) -> dict[str, Any]:
    return {
        "model": "sim-upstream",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": content},
        ],
        "max_completion_tokens": 1000,
        **extra,
    }


def stream_body(content: str = "Name three colours.", **extra: Any) -> dict[str, Any]:
    return body(content, stream=True, stream_options={"include_usage": True}, **extra)


async def collect(provider: ChatProvider, request: dict[str, Any]) -> list[dict[str, Any]]:
    stream = await provider.stream(request)
    try:
        return [chunk async for chunk in stream]
    finally:
        await stream.aclose()


def test_registry_builds_a_simulator_from_its_config_table() -> None:
    spec = spec_for("simulator")
    options = msgspec.convert({"latency_ms": 0, "tokens_per_second": 50}, spec.options_type)
    assert isinstance(spec.create("sim", options), ChatProvider)


def test_options_reject_typos_and_bad_values_naming_the_field() -> None:
    with pytest.raises(msgspec.ValidationError, match="latncy_ms"):
        msgspec.convert({"latncy_ms": 5}, Options)
    with pytest.raises(msgspec.ValidationError, match="failure_rate"):
        msgspec.convert({"failure_rate": 1.5}, Options)


def test_complete_is_a_full_chat_completion_with_usage() -> None:
    async def test() -> None:
        result = await create("sim", Options()).complete(body())
        completion = result.body
        assert completion["id"].startswith("chatcmpl-sim-")
        assert completion["object"] == "chat.completion"
        assert completion["model"] == "sim-upstream"
        assert completion["system_fingerprint"] == "fp_simulator"
        choice = completion["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert choice["message"]["role"] == "assistant"
        assert choice["message"]["content"].endswith(".")
        usage = completion["usage"]
        assert usage["prompt_tokens_details"]["cached_tokens"] == 0
        assert usage["completion_tokens_details"]["reasoning_tokens"] == 0
        assert 8 <= usage["completion_tokens"] <= 60
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (
            usage["prompt_tokens"],
            usage["completion_tokens"],
        )

    run(test)


def test_prompt_tokens_follow_the_documented_rule() -> None:
    async def test() -> None:
        request = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        result = await create("sim", Options()).complete(request)
        assert result.usage.prompt_tokens == 3 + 4 + 2  # per request, per message, ceil(5 / 4)

    run(test)


def test_same_messages_same_answer_and_lengths_vary_with_the_prompt() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        first = await provider.complete(body("hello"))
        again = await provider.complete(body("hello"))
        assert first.body["choices"][0]["message"] == again.body["choices"][0]["message"]
        assert first.body["id"] != again.body["id"]
        lengths = set()
        for n in range(40):
            result = await provider.complete(body(f"prompt {n}"))
            lengths.add(result.usage.completion_tokens)
        assert min(lengths) >= 8 and max(lengths) <= 60 and len(lengths) > 10

    run(test)


def test_max_completion_tokens_cuts_the_answer_with_finish_length() -> None:
    async def test() -> None:
        result = await create("sim", Options()).complete(body(max_completion_tokens=5))
        assert result.body["choices"][0]["finish_reason"] == "length"
        assert result.usage.completion_tokens == 5
        capped = await create("sim", Options(max_output_tokens=3)).complete(body())
        assert capped.usage.completion_tokens == 3

    run(test)


def test_stream_chunk_order_and_usage() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        chunks = await collect(provider, stream_body())
        assert chunks[0]["choices"][0]["delta"] == {
            "role": "assistant",
            "content": "",
            "refusal": None,
        }
        content = [c["choices"][0]["delta"]["content"] for c in chunks[1:-2]]
        finish, usage_chunk = chunks[-2], chunks[-1]
        assert finish["choices"][0] == {
            "index": 0,
            "delta": {},
            "logprobs": None,
            "finish_reason": "stop",
        }
        assert usage_chunk["choices"] == []
        assert usage_chunk["usage"]["completion_tokens"] == len(content)
        assert {c["id"] for c in chunks} == {chunks[0]["id"]}
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        whole = await provider.complete(body())
        assert "".join(content) == whole.body["choices"][0]["message"]["content"]

        stream = await provider.stream(stream_body())
        async for _ in stream:
            pass
        assert stream.usage == whole.usage

    run(test)


def test_no_usage_chunk_unless_asked() -> None:
    async def test() -> None:
        chunks = await collect(create("sim", Options()), body(stream=True))
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"

    run(test)


@pytest.mark.parametrize(
    ("directive", "error"),
    [
        ("[[sim:fail=502]]", ProviderError),
        ("[[sim:fail=503]]", UpstreamUnavailable),
        ("[[sim:fail=504]]", UpstreamTimeout),
        ("[[sim:fail=400]]", UpstreamRejectedRequest),
        ("[[sim:fail=429]]", UpstreamUnavailable),
        ("[[sim:fail=401]]", ProviderError),
    ],
)
def test_fail_directives_raise_the_matching_error(directive: str, error: type[Exception]) -> None:
    async def test() -> None:
        provider = create("sim", Options())
        for call in (provider.complete(body(directive)), provider.stream(stream_body(directive))):
            with pytest.raises(ProviderError) as caught:
                await call
            assert type(caught.value) is error

    run(test)


def test_fail_after_breaks_a_stream_after_n_content_chunks() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        stream = await provider.stream(stream_body("story [[sim:fail_after=3]]"))
        received: list[dict[str, Any]] = []
        with pytest.raises(ProviderError):
            async for chunk in stream:
                received.append(chunk)
        await stream.aclose()
        assert len(received) == 4  # the role chunk and three content chunks
        with pytest.raises(ProviderError) as caught:
            await provider.complete(body("story [[sim:fail_after=3]]"))
        assert type(caught.value) is ProviderError

    run(test)


def test_directives_count_only_in_the_last_user_message() -> None:
    async def test() -> None:
        request = body("fine now")
        request["messages"].insert(1, {"role": "user", "content": "[[sim:fail=502]]"})
        await create("sim", Options()).complete(request)
        with pytest.raises(UpstreamRejectedRequest, match="fial"):
            await create("sim", Options()).complete(body("[[sim:fial=502]]"))

    run(test)


def test_tokens_and_delay_directives_and_latency_option() -> None:
    async def test() -> None:
        result = await create("sim", Options()).complete(body("[[sim:tokens=77]]"))
        assert result.usage.completion_tokens == 77
        started = time.perf_counter()
        await create("sim", Options(latency_ms=30)).complete(body("[[sim:delay_ms=30]]"))
        assert time.perf_counter() - started >= 0.055

    run(test)


def test_tokens_per_second_paces_the_stream() -> None:
    async def test() -> None:
        provider = create("sim", Options(tokens_per_second=200))
        started = time.perf_counter()
        chunks = await collect(provider, stream_body("[[sim:tokens=11]]"))
        assert len(chunks) == 1 + 11 + 2
        assert time.perf_counter() - started >= 10 / 200 - 0.005

    run(test)


def test_failure_rate_one_always_fails_zero_never() -> None:
    async def test() -> None:
        with pytest.raises(UpstreamUnavailable):
            await create("sim", Options(failure_rate=1)).complete(body())
        await create("sim", Options(failure_rate=0)).complete(body())

    run(test)


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["c", "f"]},
                "days": {"type": "integer"},
            },
        },
    },
}
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {}}}


def test_tool_call_directive_and_required_tool_choice() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        result = await provider.complete(body("[[sim:tool_call]]"))
        choice = result.body["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        assert choice["message"]["content"] is None
        call = choice["message"]["tool_calls"][0]
        assert call["type"] == "function" and call["id"].startswith("call_")
        assert isinstance(msgspec.json.decode(call["function"]["arguments"]), dict)

        named = {"type": "function", "function": {"name": "get_weather"}}
        result = await provider.complete(body(tools=[SEARCH, WEATHER], tool_choice=named))
        call = result.body["choices"][0]["message"]["tool_calls"][0]
        assert call["function"]["name"] == "get_weather"
        arguments = msgspec.json.decode(call["function"]["arguments"])
        assert set(arguments) == {"city", "unit", "days"}
        assert arguments["unit"] in ("c", "f") and isinstance(arguments["days"], int)

        result = await provider.complete(body(tools=[WEATHER], tool_choice="required"))
        assert result.body["choices"][0]["finish_reason"] == "tool_calls"
        result = await provider.complete(body(tools=[WEATHER], tool_choice="none"))
        assert result.body["choices"][0]["finish_reason"] == "stop"

    run(test)


READ = {
    "type": "function",
    "function": {
        "name": "Read",
        "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    },
}


def test_a_directive_names_the_tool_and_its_input() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        ask = 'Read it [[sim:tool_call=Read]] [[sim:tool_input={"file_path": "/w/note.txt"}]]'
        result = await provider.complete(body(ask, tools=[SEARCH, READ, WEATHER]))
        choice = result.body["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        assert call["function"] == {"name": "Read", "arguments": '{"file_path":"/w/note.txt"}'}
        # Streamed, the same call; a name alone gets arguments from its parameters.
        chunks = await collect(provider, stream_body(ask, tools=[SEARCH, READ, WEATHER]))
        pieces = [
            part["function"].get("arguments", "")
            for chunk in chunks
            for choice in chunk["choices"]
            for part in choice["delta"].get("tool_calls") or ()
        ]
        assert "".join(pieces) == '{"file_path":"/w/note.txt"}'
        result = await provider.complete(
            body("[[sim:tool_call=get_weather]]", tools=[READ, WEATHER])
        )
        call = result.body["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call["name"] == "get_weather"
        assert set(msgspec.json.decode(call["arguments"])) == {"city", "unit", "days"}
        for bad in ("[[sim:tool_input=[1]]]", "[[sim:tool_input={nope}]]", "[[sim:tool_call=a b]]"):
            with pytest.raises(UpstreamRejectedRequest, match="malformed simulator directive"):
                await provider.complete(body(bad, tools=[READ]))

    run(test)


def test_a_tool_call_directive_does_not_outlive_its_turn() -> None:
    """An agent's loop driven by `[[sim:tool_call]]`: after the tool result (and a system
    message, as Claude Code sends mid-conversation) the answer is text, so the loop ends."""

    async def test() -> None:
        provider = create("sim", Options())
        ask = "[[sim:tool_call=Read]] [[sim:tool_input={}]]"
        request = body(ask, tools=[READ])
        request["messages"].append({"role": "system", "content": "Reminder: be brief."})
        first = (await provider.complete(request)).body["choices"][0]
        assert first["finish_reason"] == "tool_calls"
        request["messages"] += [
            first["message"],
            {
                "role": "tool",
                "tool_call_id": first["message"]["tool_calls"][0]["id"],
                "content": "ok",
            },
        ]
        second = (await provider.complete(request)).body["choices"][0]
        assert second["finish_reason"] == "stop" and second["message"]["content"]
        # A fail directive of an answered turn does not fail the next call either.
        request["messages"][1]["content"] = "[[sim:fail=502]]"
        assert (await provider.complete(request)).body["choices"][0]["finish_reason"] == "stop"

    run(test)


def test_streamed_tool_call_assembles_to_the_same_call() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        request = stream_body(tools=[WEATHER], tool_choice="required")
        chunks = await collect(provider, request)
        first = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
        pieces = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[1:-2]]
        arguments = "".join(p["function"]["arguments"] for p in pieces)
        assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
        assert chunks[-1]["usage"]["completion_tokens"] == len(pieces)
        whole = await provider.complete(body(tools=[WEATHER], tool_choice="required"))
        call = whole.body["choices"][0]["message"]["tool_calls"][0]
        assert (first["id"], first["function"]["name"]) == (call["id"], "get_weather")
        assert arguments == call["function"]["arguments"]

    run(test)


def test_logprobs_match_the_tokens() -> None:
    async def test() -> None:
        provider = create("sim", Options())
        result = await provider.complete(body(logprobs=True, top_logprobs=3))
        choice = result.body["choices"][0]
        items = choice["logprobs"]["content"]
        assert "".join(item["token"] for item in items) == choice["message"]["content"]
        assert len(items) == result.usage.completion_tokens
        for item in items:
            assert item["logprob"] <= 0 and bytes(item["bytes"]).decode() == item["token"]
            assert len(item["top_logprobs"]) == 3
            assert item["top_logprobs"][0]["token"] == item["token"]

        chunks = await collect(provider, stream_body(logprobs=True, top_logprobs=3))
        streamed = [c["choices"][0]["logprobs"]["content"][0] for c in chunks[1:-2]]
        assert streamed == items

    run(test)


def test_aclose_stops_generation_and_is_safe_twice() -> None:
    async def test() -> None:
        stream = await create("sim", Options()).stream(stream_body("[[sim:tokens=50]]"))
        iterator = aiter(stream)
        await anext(iterator)
        await anext(iterator)
        await stream.aclose()
        await stream.aclose()
        with pytest.raises(StopAsyncIteration):
            await anext(iterator)

    run(test)


def test_a_system_message_after_the_users_still_leaves_the_turn_to_a_tool() -> None:
    """Claude Code appends a system message after the user's: with tools and `auto`, the turn
    is still the user's, answered with a tool call; a directive there applies too."""

    async def test() -> None:
        provider = create("sim", Options())
        tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
        messages = [
            {"role": "user", "content": "Read a.py"},
            {"role": "system", "content": "The working directory is /src."},
        ]
        answer = await provider.complete({"model": "sim", "messages": messages, "tools": tools})
        (call,) = answer.body["choices"][0]["message"]["tool_calls"]
        assert call["function"]["name"] == "read_file"
        messages[0]["content"] = "Read a.py [[sim:fail=503]]"
        with pytest.raises(UpstreamUnavailable):
            await provider.complete({"model": "sim", "messages": messages, "tools": tools})

    run(test)


def test_a_directive_applies_to_its_turn_only() -> None:
    """After the tool's result comes back, `[[sim:tool_call]]` in the user's earlier message
    no longer forces a call: an agent loop it drives ends."""

    async def test() -> None:
        provider = create("sim", Options())
        tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Go [[sim:tool_call]]"}]
        first = await provider.complete({"model": "sim", "messages": messages, "tools": tools})
        message = first.body["choices"][0]["message"]
        (call,) = message["tool_calls"]
        messages += [message, {"role": "tool", "tool_call_id": call["id"], "content": "x = 1"}]
        second = await provider.complete({"model": "sim", "messages": messages, "tools": tools})
        assert second.body["choices"][0]["finish_reason"] == "stop"
        assert second.body["choices"][0]["message"]["content"]

    run(test)
