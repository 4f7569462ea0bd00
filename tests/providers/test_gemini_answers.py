"""The Gemini adapter against a real local fake upstream: what the gateway gets back, whole
and streamed (text, thoughts, tool calls, finish reasons, usage, the wire framing)."""

from __future__ import annotations

import msgspec

from providers.base import Usage
from tests.fakes.gemini_upstream import (
    Reply,
    StreamReply,
    candidate,
    events_for,
    function_call,
    response,
    text,
    usage,
)
from tests.providers.gemini_support import BODY, STREAM_BODY, collect, run, upstream


def test_a_completion_with_thoughts_text_and_tool_calls() -> None:
    answer = response(
        candidate(
            text("The user wants two cities.", thought=True),
            text("Paris: "),
            text("18C."),
            function_call("get_weather", {"city": "Rome"}, signature="c2ln"),
            function_call("get_time"),
        ),
        usage_metadata={
            "promptTokenCount": 100,
            "candidatesTokenCount": 20,
            "totalTokenCount": 150,
            "cachedContentTokenCount": 64,
            "thoughtsTokenCount": 30,
        },
    )

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(body=answer))
            result = await provider.complete(BODY)
            body = result.body
            assert body["id"] == "chatcmpl-resp-fake"
            assert body["object"] == "chat.completion" and body["model"] == "gemini-fake-001"
            assert isinstance(body["created"], int) and body["created"] > 1_700_000_000
            (choice,) = body["choices"]
            calls = choice["message"].pop("tool_calls")
            assert choice == {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Paris: 18C.",
                    "refusal": None,
                    "reasoning_content": "The user wants two cities.",
                },
                "logprobs": None,
                "finish_reason": "tool_calls",
            }
            assert [c["id"][:5] for c in calls] == ["call_", "call_"]
            assert len({c["id"] for c in calls}) == 2 and len(calls[0]["id"]) == 29
            assert [c["function"] for c in calls] == [
                {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                {"name": "get_time", "arguments": "{}"},
            ]
            assert calls[0]["extra_content"] == {"google": {"thought_signature": "c2ln"}}
            assert calls[0]["type"] == "function" and "extra_content" not in calls[1]
            assert result.usage == Usage(
                prompt_tokens=100, completion_tokens=50, total_tokens=150, cached_tokens=64
            )
            assert body["usage"] == {
                "prompt_tokens": 100,
                "completion_tokens": 50,
                "total_tokens": 150,
                "prompt_tokens_details": {"cached_tokens": 64},
                "completion_tokens_details": {"reasoning_tokens": 30},
            }

    run(test)


def test_finish_reasons_candidates_logprobs_and_model() -> None:
    table = [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "stop"),
        ("OTHER", "stop"),
    ]

    async def test() -> None:
        async with upstream() as (fake, provider):
            for reason, _ in table:
                fake.enqueue(Reply(body=response(candidate(text("x"), finish=reason))))
            found = [(await provider.complete(BODY)).body["choices"][0] for _ in table]
            assert [c["finish_reason"] for c in found] == [mapped for _, mapped in table]
            two = response(candidate(text("a")), candidate(finish="SAFETY", index=1))
            two["candidates"][0]["logprobsResult"] = {
                "topCandidates": [
                    {
                        "candidates": [
                            {"token": "a", "logProbability": -0.1},
                            {"token": "é", "logProbability": -2.5},
                        ]
                    }
                ],
                "chosenCandidates": [{"token": "a", "tokenId": 64, "logProbability": -0.1}],
            }
            del two["modelVersion"], two["usageMetadata"], two["responseId"]
            fake.enqueue(Reply(body=two))
            result = await provider.complete({**BODY, "n": 2})
            first, second = result.body["choices"]
            assert result.body["model"] == "gemini-2.5-flash"  # no modelVersion: the name asked
            assert result.body["id"].startswith("chatcmpl-") and "usage" not in result.body
            assert result.usage == Usage()
            assert first["logprobs"] == {
                "content": [
                    {
                        "token": "a",
                        "logprob": -0.1,
                        "bytes": [97],
                        "top_logprobs": [
                            {"token": "a", "logprob": -0.1, "bytes": [97]},
                            {"token": "é", "logprob": -2.5, "bytes": [195, 169]},
                        ],
                    }
                ],
                "refusal": None,
            }
            assert second["index"] == 1 and second["finish_reason"] == "content_filter"
            assert second["message"]["content"] is None

    run(test)


def test_a_text_stream_reassembled() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            stream = await provider.stream(STREAM_BODY)
            chunks = [c async for c in stream]
            await stream.aclose()
            await stream.aclose()
            created = chunks[0]["created"]
            base = {"id": "chatcmpl-resp-fake", "object": "chat.completion.chunk"}
            base |= {"created": created, "model": "gemini-fake-001"}
            assert all({k: c[k] for k in base} == base for c in chunks)
            choices = [c["choices"] for c in chunks]
            assert choices[0] == [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "Hello"},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ]
            words = [c[0]["delta"]["content"] for c in choices[:-2]]
            assert "".join(words) == fake.text and len(words) == 6
            assert all("role" not in c[0]["delta"] for c in choices[1:-2])
            assert choices[-2] == [
                {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
            ]
            assert chunks[-1]["choices"] == []
            assert chunks[-1]["usage"] == {
                "prompt_tokens": 12,
                "completion_tokens": 6,
                "total_tokens": 18,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0},
            }
            assert stream.usage == Usage(prompt_tokens=12, completion_tokens=6, total_tokens=18)
            await provider.complete(BODY)
            assert fake.requests[0].client_port == fake.requests[1].client_port  # pooled again

    run(test)


def test_a_stream_with_thoughts_and_tool_calls() -> None:
    events = [
        response(candidate(text("Two cities.", thought=True), finish=None)),
        response(
            candidate(
                function_call("get_weather", {"city": "Paris"}, signature="c2ln"),
                function_call("get_weather", {"city": "Rome"}),
                finish=None,
            )
        ),
        response(candidate(function_call("get_time"), finish=None)),
        response(
            candidate(finish="STOP"),
            usage_metadata=usage(40, 12, thoughts=9, cached=32),
        ),
    ]

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=events))
            chunks = await collect(provider, STREAM_BODY)
            deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
            assert deltas[0] == {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Two cities.",
            }
            calls = deltas[1]["tool_calls"] + deltas[2]["tool_calls"]
            assert [c["index"] for c in calls] == [0, 1, 2]
            assert [c["function"]["arguments"] for c in calls] == [
                '{"city":"Paris"}',
                '{"city":"Rome"}',
                "{}",
            ]
            assert calls[0]["extra_content"] == {"google": {"thought_signature": "c2ln"}}
            assert all(c["id"].startswith("call_") and c["type"] == "function" for c in calls)
            assert chunks[3]["choices"][0]["finish_reason"] == "tool_calls"
            assert len(chunks) == 5 and chunks[4]["usage"]["prompt_tokens_details"] == {
                "cached_tokens": 32
            }
            assert chunks[4]["usage"]["completion_tokens"] == 21
            assert chunks[4]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 9}

    run(test)


def test_stream_framing_from_the_wire() -> None:
    async def test() -> None:
        events = events_for("one two three")
        wire = b"".join(b"data: " + msgspec.json.encode(e) + b"\r\n\r\n" for e in events)
        pieces = [b": keep-alive\r\n\r\n", wire[:7], wire[7:100], wire[100:-1], wire[-1:]]
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=events))
            whole = await collect(provider, STREAM_BODY)
            fake.enqueue(StreamReply(events=pieces, chunk_delay=0.01))
            pieced = await collect(provider, STREAM_BODY)
            for chunks in (whole, pieced):
                text_ = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
                assert text_ == "one two three" and len(chunks) == 5
            # Without a blank line after the last event, the end of the body still ends it.
            fake.enqueue(StreamReply(events=[wire[:-2]]))
            assert len(await collect(provider, STREAM_BODY)) == 5

    run(test)
