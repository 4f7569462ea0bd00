"""The Gemini adapter against traffic recorded from the real Gemini API
(`tests/fakes/recorded/`): thought signatures and call ids come back and go out again, a
no-argument call streams as "{}", a stream cut after its thinking reports Gemini's counts, and
a quota error keeps its meaning."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from providers.base import ChatProvider, ChatStream, Usage
from providers.errors import ProviderError, UpstreamRejectedRequest, UpstreamUnavailable
from providers.gemini import Options, create
from tests.fakes.gemini_upstream import FakeGemini, Reply, StreamReply
from tests.fakes.recorded import gemini_frames, load, sse_events
from tests.providers.adapter_checks import run

TOOL_LOOP = load("gemini_tool_loop_stream")
CALL_IDS = load("gemini_function_call_ids")
GEMINI3_CALL = load("gemini_tool_call_gemini3")
TEXT_SIGNATURE = load("gemini_text_signature")
STREAM_USAGE = load("gemini_stream_usage")
QUOTA = load("gemini_error_429")

COUNTRY_TOOL = {
    "type": "function",
    "function": {
        "name": "get_country",
        "description": "",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@asynccontextmanager
async def gemini() -> AsyncIterator[tuple[FakeGemini, ChatProvider]]:
    async with FakeGemini() as fake:
        provider = create("gemini", Options(base_url=fake.base_url))
        try:
            yield fake, provider
        finally:
            await provider.close()


async def collect(stream: ChatStream) -> list[dict[str, Any]]:
    try:
        return [chunk async for chunk in stream]
    finally:
        await stream.aclose()


def assembled(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message an OpenAI client makes of the chunks (tool calls kept whole with
    their `extra_content`, as Gemini's arrive whole)."""
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    calls: list[dict[str, Any]] = []
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            message["content"] += delta.get("content") or ""
            calls += [
                {k: v for k, v in c.items() if k != "index"} for c in delta.get("tool_calls") or ()
            ]
    if calls:
        message["tool_calls"] = calls
    return message


def test_a_streamed_tool_loop_round_trips_the_signature_and_the_call_id() -> None:
    first, second = TOOL_LOOP["exchanges"]
    question = first["request"]["contents"][0]["parts"][0]["text"]
    body = {
        "model": "gemini-3-pro-preview",
        "messages": [{"role": "user", "content": question}],
        "tools": [COUNTRY_TOOL],
        "stream": True,
    }

    async def test() -> None:
        async with gemini() as (fake, provider):
            fake.enqueue(StreamReply(events=sse_events(first["sse"])))
            fake.enqueue(StreamReply(events=sse_events(second["sse"])))
            message = assembled(await collect(await provider.stream(body)))
            (call,) = message["tool_calls"]
            assert call["function"] == {"name": "get_country", "arguments": "{}"}
            recorded_part = json.loads(sse_events(first["sse"])[0][6:])["candidates"][0]
            signature = recorded_part["content"]["parts"][0]["thoughtSignature"]
            assert call["extra_content"] == {"google": {"thought_signature": signature}}

            result = {"role": "tool", "tool_call_id": call["id"], "content": "Mexico"}
            turn_two = {**body, "messages": [*body["messages"], message, result]}
            answer = assembled(await collect(await provider.stream(turn_two)))
            assert answer["content"] == "The capital of Mexico is Mexico City."

            sent = fake.requests[1].json["contents"]
            recorded = second["request"]["contents"]
            # The shape Gemini accepted in the recording: the call with its id and signature,
            # the response naming the same id.
            assert [turn["role"] for turn in sent] == [turn["role"] for turn in recorded]
            (call_part,) = sent[1]["parts"]
            assert call_part.keys() == recorded[1]["parts"][0].keys()
            assert (
                call_part["functionCall"].keys() == recorded[1]["parts"][0]["functionCall"].keys()
            )
            assert call_part["functionCall"]["id"] == call["id"]
            assert call_part["thoughtSignature"] == signature
            (response_part,) = sent[2]["parts"]
            assert response_part["functionResponse"]["id"] == call["id"]
            assert response_part["functionResponse"]["name"] == "get_country"

    run(test)


def test_gemini_3_call_ids_are_kept_so_parallel_calls_match_by_id() -> None:
    body = {
        "model": "gemini-3.6-flash",
        "messages": [{"role": "user", "content": "Weather in Denver and Moab?"}],
        "tools": [WEATHER_TOOL],
    }

    async def test() -> None:
        async with gemini() as (fake, provider):
            fake.enqueue(Reply(body=CALL_IDS["response"]))
            message = (await provider.complete(body)).body["choices"][0]["message"]
            assert [c["id"] for c in message["tool_calls"]] == ["call_4162774", "call_4162775"]
            # The results come back in another order than the calls: the ids match them.
            results = [
                {"role": "tool", "tool_call_id": "call_4162775", "content": "30C"},
                {"role": "tool", "tool_call_id": "call_4162774", "content": "12C"},
            ]
            fake.enqueue(Reply())
            await provider.complete({**body, "messages": [*body["messages"], message, *results]})
            model_turn, results_turn = fake.requests[1].json["contents"][1:]
            assert [p["functionCall"]["id"] for p in model_turn["parts"]] == [
                "call_4162774",
                "call_4162775",
            ]
            assert [
                (p["functionResponse"]["id"], p["functionResponse"]["response"]["content"])
                for p in results_turn["parts"]
            ] == [("call_4162775", "30C"), ("call_4162774", "12C")]

    run(test)


def test_a_gemini_3_call_keeps_its_signature_whole_and_streamed() -> None:
    body = {
        "model": "gemini-3-pro-preview",
        "messages": [{"role": "user", "content": "Weather in San Francisco?"}],
        "tools": [WEATHER_TOOL],
    }
    recorded = GEMINI3_CALL["response"]["candidates"][0]["content"]["parts"][0]
    streamed = json.loads(GEMINI3_CALL["events"][0])["candidates"][0]["content"]["parts"][0]

    async def test() -> None:
        async with gemini() as (fake, provider):
            fake.enqueue(Reply(body=GEMINI3_CALL["response"]))
            fake.enqueue(StreamReply(events=gemini_frames(GEMINI3_CALL["events"])))
            whole = (await provider.complete(body)).body
            (call,) = whole["choices"][0]["message"]["tool_calls"]
            assert (
                call["extra_content"]["google"]["thought_signature"] == recorded["thoughtSignature"]
            )
            assert call["function"]["arguments"] == '{"location":"San Francisco"}'
            # thinking is billed as output: 15 candidates + 1801 thoughts
            assert whole["usage"]["completion_tokens"] == 1816
            message = assembled(await collect(await provider.stream({**body, "stream": True})))
            (call,) = message["tool_calls"]
            assert (
                call["extra_content"]["google"]["thought_signature"] == streamed["thoughtSignature"]
            )

    run(test)


def test_a_text_answers_signature_goes_back_on_its_text() -> None:
    body = {
        "model": "gemini-3-pro-preview",
        "messages": [{"role": "user", "content": "How many r in strawberry?"}],
    }
    (part,) = TEXT_SIGNATURE["response"]["candidates"][0]["content"]["parts"]

    async def test() -> None:
        async with gemini() as (fake, provider):
            fake.enqueue(Reply(body=TEXT_SIGNATURE["response"]))
            message = (await provider.complete(body)).body["choices"][0]["message"]
            assert message["content"] == part["text"]
            assert message["extra_content"] == {
                "google": {"thought_signature": part["thoughtSignature"]}
            }
            fake.enqueue(Reply())
            follow_up = {"role": "user", "content": "And in raspberry?"}
            await provider.complete({**body, "messages": [*body["messages"], message, follow_up]})
            model_turn = fake.requests[1].json["contents"][1]
            assert model_turn == {"role": "model", "parts": [part]}

    run(test)


def test_a_stream_cut_after_its_thinking_reports_what_gemini_counted() -> None:
    (exchange,) = STREAM_USAGE["exchanges"]
    events = sse_events(exchange["sse"])
    first = json.loads(events[0][6:])["usageMetadata"]
    body = {
        "model": "gemini-2.5-flash",
        "messages": [{"role": "user", "content": "Count from 1 to 30."}],
        "stream": True,
    }

    async def test() -> None:
        async with gemini() as (fake, provider):
            fake.enqueue(StreamReply(events=events, break_after=1))
            stream = await provider.stream(body)
            received: list[dict[str, Any]] = []
            with pytest.raises(ProviderError):
                async for chunk in stream:
                    received.append(chunk)
            await stream.aclose()
            assert assembled(received)["content"].startswith("1\n2\n3")
            # The counts of the last event that arrived: thoughts are output too.
            assert stream.usage == Usage(
                prompt_tokens=first["promptTokenCount"],
                completion_tokens=first["candidatesTokenCount"] + first["thoughtsTokenCount"],
                total_tokens=first["totalTokenCount"],
                partial=True,
            )
            assert stream.usage.completion_tokens == 31 + 35

    run(test)


def test_a_quota_error_keeps_its_message_and_says_when_to_retry() -> None:
    async def test() -> None:
        async with gemini() as (fake, provider):
            fake.enqueue(Reply(status=QUOTA["status"], body=QUOTA["body"]))
            with pytest.raises(UpstreamUnavailable) as raised:
                await provider.complete(
                    {
                        "model": "gemini-3-pro-preview",
                        "messages": [{"role": "user", "content": "Hi"}],
                    }
                )
            error = raised.value
            assert QUOTA["body"]["error"]["message"] in error.message
            assert error.retryable and error.retry_after == 34.4 and error.upstream_status == 429

    run(test)


@pytest.mark.parametrize("model", ["gemini-3-pro-preview", "models/gemini-2.5-pro"])
def test_turning_thinking_off_where_gemini_cannot_is_refused_here(model: str) -> None:
    async def test() -> None:
        async with gemini() as (fake, provider):
            body = {"model": model, "messages": [{"role": "user", "content": "Hi"}]}
            with pytest.raises(UpstreamRejectedRequest) as refused:
                await provider.complete({**body, "reasoning_effort": "none"})
            assert refused.value.message.startswith("reasoning_effort: ")
            assert fake.requests == []
            await provider.complete({**body, "reasoning_effort": "minimal"})
            sent = fake.requests[0].json["generationConfig"]["thinkingConfig"]
            assert sent == {"thinkingBudget": 512}

    run(test)
