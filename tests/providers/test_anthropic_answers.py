"""The Anthropic adapter against a real local fake Messages API: what the gateway gets back,
whole and streamed (text, tool calls, thinking, finish reasons, cache usage, the wire framing)."""

from __future__ import annotations

import pytest

from providers.base import Usage
from tests.fakes.anthropic_upstream import (
    DEFAULT_TEXT,
    Reply,
    StreamReply,
    events_for,
    message,
    sse,
    text,
    thinking,
    tool_use,
)
from tests.providers.anthropic_support import BODY, STREAM_BODY, collect, reassemble, run, upstream

TOOL_MESSAGE = message(
    text("Let me check."),
    tool_use("toolu_1", "get_weather", {"city": "Paris"}),
    tool_use("toolu_2", "get_weather", {"city": "Lyon", "days": [1, 2]}),
    stop_reason="tool_use",
)


def test_response_text_tool_calls_thinking_and_cache_usage() -> None:
    whole = message(
        thinking("The user wants weather. "),
        thinking("Call the tool."),
        *TOOL_MESSAGE["content"],
        stop_reason="tool_use",
        model="claude-upstream-2025",
        input_tokens=10,
        output_tokens=30,
        cache_read=100,
        cache_creation=20,
    )

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(message=whole))
            result = await provider.complete(BODY)
            body = result.body
            assert (body["id"], body["model"], body["object"]) == (
                "msg_fake",
                "claude-upstream-2025",
                "chat.completion",
            )
            assert isinstance(body["created"], int)
            (choice,) = body["choices"]
            assert choice["finish_reason"] == "tool_calls"
            assert choice["message"] == {
                "role": "assistant",
                "content": "Let me check.",
                "refusal": None,
                "reasoning_content": "The user wants weather. Call the tool.",
                "thinking_blocks": [
                    {
                        "type": "thinking",
                        "thinking": "The user wants weather. ",
                        "signature": "sig-fake",
                    },
                    {"type": "thinking", "thinking": "Call the tool.", "signature": "sig-fake"},
                ],
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "toolu_2",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": '{"city":"Lyon","days":[1,2]}',
                        },
                    },
                ],
            }
            assert body["usage"] == {
                "prompt_tokens": 130,
                "completion_tokens": 30,
                "total_tokens": 160,
                "prompt_tokens_details": {"cached_tokens": 100, "cache_creation_tokens": 20},
            }
            assert result.usage == Usage(
                prompt_tokens=130,
                completion_tokens=30,
                total_tokens=160,
                cached_tokens=100,
                cache_creation_tokens=20,
            )

    run(test)


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "stop"),
        ("model_context_window_exceeded", "length"),
        ("a_reason_from_the_future", "stop"),
    ],
)
def test_finish_reasons_for_complete_and_stream(stop_reason: str, finish: str) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(message=message(stop_reason=stop_reason)))
            result = await provider.complete(BODY)
            assert result.body["choices"][0]["finish_reason"] == finish
            assert result.body["choices"][0]["message"]["content"] == DEFAULT_TEXT
            assert "tool_calls" not in result.body["choices"][0]["message"]
            fake.enqueue(StreamReply(message=message(stop_reason=stop_reason)))
            chunks = await collect(await provider.stream(STREAM_BODY))
            assert reassemble(chunks)["finish"] == finish

    run(test)


def test_stream_chunks_in_openai_order() -> None:
    async def test() -> None:
        async with upstream() as (_, provider):
            stream = await provider.stream(STREAM_BODY)
            assert stream.ready()  # the role chunk and the first word arrived together
            chunks = await collect(stream)
            await stream.aclose()
            words = DEFAULT_TEXT.split(" ")
            assert [c["choices"][0]["delta"] for c in chunks[:-1]] == [
                {"role": "assistant", "content": ""},
                *({"content": w if i == 0 else " " + w} for i, w in enumerate(words)),
                {},
            ]
            assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (
                len(words) + 1
            ) + ["stop"]
            assert all(
                (c["id"], c["model"], c["object"])
                == ("msg_fake", "claude-upstream", "chat.completion.chunk")
                for c in chunks
            )
            assert chunks[-1]["choices"] == []
            assert chunks[-1]["usage"] == {
                "prompt_tokens": 12,
                "completion_tokens": 6,
                "total_tokens": 18,
                "prompt_tokens_details": {"cached_tokens": 0, "cache_creation_tokens": 0},
            }
            assert stream.usage == Usage(prompt_tokens=12, completion_tokens=6, total_tokens=18)

    run(test)


def test_stream_reassembles_into_the_same_answer_as_complete() -> None:
    whole = message(
        thinking("Weather needs a tool."),
        *TOOL_MESSAGE["content"],
        stop_reason="tool_use",
        input_tokens=5,
        output_tokens=40,
        cache_read=64,
        cache_creation=8,
    )

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(message=whole), StreamReply(message=whole))
            completed = (await provider.complete(BODY)).body
            stream = await provider.stream(STREAM_BODY)
            chunks = await collect(stream)
            streamed = reassemble(chunks)
            expected = completed["choices"][0]["message"]
            assert streamed["content"] == expected["content"]
            assert streamed["reasoning"] == expected["reasoning_content"]
            assert streamed["finish"] == "tool_calls"
            assert [
                {
                    "id": c["id"],
                    "type": c["type"],
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in streamed["calls"].values()
            ] == expected["tool_calls"]
            # Each call opens with its id and name and empty arguments, then fragments follow.
            opening = [
                c["choices"][0]["delta"]["tool_calls"][0]
                for c in chunks
                if c["choices"] and "id" in (c["choices"][0]["delta"].get("tool_calls") or [{}])[0]
            ]
            assert [(o["index"], o["id"], o["function"]["arguments"]) for o in opening] == [
                (0, "toolu_1", ""),
                (1, "toolu_2", ""),
            ]
            assert chunks[-1]["usage"] == completed["usage"]
            assert stream.usage == Usage(
                prompt_tokens=77,
                completion_tokens=40,
                total_tokens=117,
                cached_tokens=64,
                cache_creation_tokens=8,
            )

    run(test)


def test_stream_framing_from_the_wire() -> None:
    async def test() -> None:
        wire = b"".join(sse(e) for e in events_for(message())).replace(b"\n", b"\r\n")
        pieces = [b": keep-alive\r\n\r\n", wire[:9], wire[9:150], wire[150:]]
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=pieces, event_delay=0.01), StreamReply())
            framed = await collect(await provider.stream(STREAM_BODY))
            plain = await collect(await provider.stream(STREAM_BODY))
            assert [c["choices"] for c in framed] == [c["choices"] for c in plain]
            assert reassemble(framed)["content"] == DEFAULT_TEXT

    run(test)


def test_message_delta_usage_with_cache_fields_wins() -> None:
    events = events_for(message(input_tokens=3, output_tokens=9))
    events[-2]["usage"] = {"input_tokens": 4, "cache_read_input_tokens": 50, "output_tokens": 11}

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=events))
            chunks = await collect(await provider.stream(STREAM_BODY))
            assert chunks[-1]["usage"]["prompt_tokens"] == 54
            assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 50
            assert chunks[-1]["usage"]["completion_tokens"] == 11

    run(test)
