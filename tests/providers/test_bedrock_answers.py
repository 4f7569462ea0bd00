"""The Bedrock adapter's answers: Converse answers and ConverseStream events (recorded from
the real API where public recordings exist) as OpenAI completions and chunks."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.fakes.bedrock_upstream import (
    Reply,
    StreamReply,
    answer,
    text,
    tool_use,
    usage,
)
from tests.fakes.recorded import load
from tests.providers.bedrock_support import BODY, STREAM_BODY, collect, run, upstream


def _events(name: str) -> list[tuple[str, dict[str, Any]]]:
    """A recorded `{eventType: payload}` list as (type, payload) events."""
    return [next(iter(event.items())) for event in load(name)["events"]]


def _deltas(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in chunks if c["choices"]]


def test_recorded_parallel_tool_calls_with_text(aws_env: pytest.MonkeyPatch) -> None:
    recorded = load("bedrock_parallel_tool_calls")

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(body=recorded["body"]))
            completion = await provider.complete(BODY)
        choice = completion.body["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        message = choice["message"]
        assert message["content"] == "Sure! I'll look up both values simultaneously right away!"
        assert message["tool_calls"] == [
            {
                "id": "tooluse_hr5juciYZJwUHpRczsw13R",
                "type": "function",
                "function": {"name": "get_resistor_value", "arguments": '{"ref":"R1"}'},
            },
            {
                "id": "tooluse_AZHw3Ym0S07qOv5NlXj9iJ",
                "type": "function",
                "function": {"name": "get_capacitor_value", "arguments": '{"ref":"C1"}'},
            },
        ]
        assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (694, 110)
        assert completion.body["usage"]["total_tokens"] == 804
        assert completion.body["object"] == "chat.completion"
        assert completion.body["model"] == BODY["model"]

    run(test)


def test_cache_reads_and_writes_are_part_of_the_prompt(aws_env: pytest.MonkeyPatch) -> None:
    counts = usage(100, 20, cache_read=1000, cache_write=300)

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(body=answer(text("Done."), usage_counts=counts)))
            completion = await provider.complete(BODY)
        assert completion.body["usage"] == {
            "prompt_tokens": 1400,
            "completion_tokens": 20,
            "total_tokens": 1420,
            "prompt_tokens_details": {"cached_tokens": 1000, "cache_creation_tokens": 300},
        }
        used = completion.usage
        assert (used.prompt_tokens, used.cached_tokens, used.cache_creation_tokens) == (
            1400,
            1000,
            300,
        )

    run(test)


def test_reasoning_and_its_signature_in_a_whole_answer(aws_env: pytest.MonkeyPatch) -> None:
    blocks = [
        {"reasoningContent": {"reasoningText": {"text": "Count: 3.", "signature": "c2lnLTE="}}},
        {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ="}},
        text("There are 3."),
    ]

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(body=answer(*blocks)))
            completion = await provider.complete(BODY)
        message = completion.body["choices"][0]["message"]
        assert message["content"] == "There are 3."
        assert message["reasoning_content"] == "Count: 3."
        assert message["thinking_blocks"] == [
            {"type": "thinking", "thinking": "Count: 3.", "signature": "c2lnLTE="},
            {"type": "redacted_thinking", "data": "cmVkYWN0ZWQ="},
        ]

    run(test)


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("something_new", "stop"),
    ],
)
def test_stop_reasons(aws_env: pytest.MonkeyPatch, stop: str, finish: str) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(body=answer(text("x"), stop=stop)))
            completion = await provider.complete(BODY)
        assert completion.body["choices"][0]["finish_reason"] == finish

    run(test)


def test_the_recorded_binary_stream_byte_by_byte(aws_env: pytest.MonkeyPatch) -> None:
    recorded = load("bedrock_converse_stream_live")
    body = base64.b64decode(recorded["bodyBase64"])

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(raw=body, piece=1))
            chunks = await collect(provider, STREAM_BODY)
            fake.enqueue(StreamReply(raw=body, piece=7))
            stream = await provider.stream(STREAM_BODY)
            async for _ in stream:
                pass
            stream_usage = stream.usage
            await stream.aclose()
        observed = recorded["observed"]
        assert "".join(d.get("content") or "" for d in _deltas(chunks)) == observed["text"]
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
        assert chunks[-1]["choices"] == []
        assert chunks[-1]["usage"]["prompt_tokens"] == observed["inputTokens"]
        assert chunks[-1]["usage"]["completion_tokens"] == observed["outputTokens"]
        assert stream_usage is not None and stream_usage.completion_tokens == 5

    run(test)


def test_recorded_reasoning_stream_carries_its_signature(aws_env: pytest.MonkeyPatch) -> None:
    events = _events("bedrock_reasoning_stream")
    signature = events[12][1]["delta"]["reasoningContent"]["signature"]

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=events, piece=5))
            chunks = await collect(provider, STREAM_BODY)
        deltas = _deltas(chunks)
        reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
        assert reasoning.startswith("Let me count the r's in") and reasoning.endswith("are 3 r's.")
        (signed,) = [d["thinking_blocks"] for d in deltas if "thinking_blocks" in d]
        assert signed == [{"type": "thinking", "thinking": reasoning, "signature": signature}]
        content = "".join(d.get("content") or "" for d in deltas)
        assert content == 'There are **3** r\'s in "strawberry":\n\n1. st**r**awbe**r****r**y'
        assert deltas[0]["role"] == "assistant"
        assert sum("role" in d for d in deltas) == 1
        assert chunks[-1]["usage"]["completion_tokens"] == 94

    run(test)


def test_recorded_tool_stream_opens_then_fills_the_call(aws_env: pytest.MonkeyPatch) -> None:
    events = _events("bedrock_tool_stream")

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=events))
            chunks = await collect(provider, STREAM_BODY)
        calls = [d["tool_calls"][0] for d in _deltas(chunks) if "tool_calls" in d]
        assert calls[0] == {
            "index": 0,
            "id": "functions.read_file:1",
            "type": "function",
            "function": {"name": "read_file", "arguments": ""},
        }
        arguments = "".join(call["function"]["arguments"] for call in calls)
        assert json.loads(arguments) == {"target_file": "src/cursor-config.ts"}
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        assert finishes[-1] == "tool_calls"
        assert chunks[-1]["usage"]["prompt_tokens"] == 260

    run(test)


def test_a_tool_call_without_input_gets_an_empty_object(aws_env: pytest.MonkeyPatch) -> None:
    events: list[Any] = [
        ("messageStart", {"role": "assistant"}),
        (
            "contentBlockStart",
            {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t9", "name": "now"}}},
        ),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("messageStop", {"stopReason": "tool_use"}),
        ("metadata", {"usage": usage(5, 3)}),
    ]

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=events))
            chunks = await collect(provider, STREAM_BODY)
            fake.enqueue(Reply(body=answer(tool_use("t9", "now", {}), stop="tool_use")))
            whole = await provider.complete(BODY)
        calls = [d["tool_calls"][0] for d in _deltas(chunks) if "tool_calls" in d]
        assert [c["function"]["arguments"] for c in calls] == ["", "{}"]
        assert whole.body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == "{}"

    run(test)


def test_a_stream_without_metadata_ends_after_message_stop(aws_env: pytest.MonkeyPatch) -> None:
    events: list[Any] = [
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
        ("messageStop", {"stopReason": "end_turn"}),
    ]

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=events))
            stream = await provider.stream(STREAM_BODY)
            chunks = [chunk async for chunk in stream]
            assert stream.usage is None  # Bedrock reported none: the gateway estimates
            await stream.aclose()
        assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, "stop"]

    run(test)
