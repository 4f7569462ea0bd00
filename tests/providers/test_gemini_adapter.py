"""The Gemini adapter against a real local fake upstream: what Gemini receives, what the
gateway gets back (whole and streamed), and every way a call fails."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import msgspec
import pytest

from providers.base import ChatProvider, ChatStream, Usage
from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.gemini import Options, create
from providers.registry import spec_for
from providers.status import message_from_body
from tests.fakes.gemini_upstream import (
    Disconnect,
    FakeGemini,
    Reply,
    StreamReply,
    candidate,
    error_body,
    events_for,
    function_call,
    response,
    text,
    usage,
)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


@asynccontextmanager
async def upstream(**options: Any) -> AsyncIterator[tuple[FakeGemini, ChatProvider]]:
    """A fake upstream and a provider pointed at it, both closed afterwards."""
    async with FakeGemini() as fake:
        provider = create("gem", Options(base_url=fake.base_url, **options))
        try:
            yield fake, provider
        finally:
            await provider.close()


async def drain(stream: ChatStream, into: list[dict[str, Any]]) -> None:
    async for chunk in stream:
        into.append(chunk)


async def collect(provider: ChatProvider, body: dict[str, Any]) -> list[dict[str, Any]]:
    stream = await provider.stream(body)
    chunks: list[dict[str, Any]] = []
    try:
        await drain(stream, chunks)
    finally:
        await stream.aclose()
    return chunks


BODY: dict[str, Any] = {
    "model": "gemini-2.5-flash",
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "max_completion_tokens": 256,
}
STREAM_BODY: dict[str, Any] = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
WEATHER_PARAMS = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "city": {"type": "string", "description": "City name", "format": "hostname"},
        "unit": {"type": ["string", "null"], "enum": ["C", "F"], "default": "C"},
        "days": {"type": "integer", "minimum": 1, "format": "int32"},
    },
    "required": ["city", "unit", "ghost"],
}
GEMINI_WEATHER_PARAMS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["C", "F"], "nullable": True},
        "days": {"type": "integer", "minimum": 1, "format": "int32"},
    },
    "required": ["city", "unit"],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather now",
            "parameters": WEATHER_PARAMS,
            "strict": True,
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]


def test_registry_options_and_defaults() -> None:
    spec = spec_for("gemini")
    assert spec.capabilities == frozenset({"chat"})
    assert spec.options_type is Options
    assert Options().base_url == "https://generativelanguage.googleapis.com/v1beta"
    with pytest.raises(msgspec.ValidationError, match="include_thougths"):
        msgspec.convert({"include_thougths": True}, Options)
    with pytest.raises(msgspec.ValidationError, match="base_url"):
        msgspec.convert({"base_url": "generativelanguage.googleapis.com"}, Options)


def test_urls_key_header_and_pooling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_TEST_GEMINI_KEY", "g-env")

    async def test() -> None:
        async with upstream(api_key="g-config", api_key_env="GATEWAY_TEST_GEMINI_KEY") as (
            fake,
            provider,
        ):
            await provider.complete(BODY)
            await collect(provider, STREAM_BODY)
            await provider.complete({**BODY, "model": "tunedModels/my-tune"})
            plain, streamed, tuned = fake.requests
            assert plain.method == "POST"
            assert plain.path == "/v1beta/models/gemini-2.5-flash:generateContent"
            assert streamed.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
            assert tuned.path == "/v1beta/tunedModels/my-tune:generateContent"
            assert plain.headers["x-goog-api-key"] == "g-env"
            assert plain.headers["content-type"] == "application/json"
            assert "authorization" not in plain.headers
            assert plain.json == streamed.json  # `stream` and `stream_options` are not sent
            assert plain.client_port == streamed.client_port == tuned.client_port

    run(test)


def test_the_request_gemini_receives() -> None:
    body: dict[str, Any] = {
        "model": "gemini-3-pro-preview",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Also look at these:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.com/cat.jpg?v=2", "detail": "high"},
                    },
                    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "mp3"}},
                    {
                        "type": "file",
                        "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a"},
                    },
                    {"type": "image_url", "image_url": {"url": "data:text/plain,hi%20there"}},
                ],
            },
            {
                "role": "assistant",
                "content": "Checking both.",
                "reasoning_content": "not sent back",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        "extra_content": {"google": {"thought_signature": "c2lnLWE="}},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_b", "content": "21C"},
            {
                "role": "tool",
                "tool_call_id": "call_a",
                "content": [{"type": "text", "text": "18C"}],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_c",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": ""},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_c", "content": "noon"},
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": TOOLS,
        "tool_choice": "required",
        "temperature": 0.3,
        "top_p": None,
        "max_completion_tokens": 256,
        "stop": ["END"],
        "n": 2,
        "seed": 7,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "logprobs": True,
        "top_logprobs": 3,
        "response_format": {"type": "json_object"},
        "reasoning_effort": "low",
        "parallel_tool_calls": True,
        "logit_bias": {"15": 2},
        "user": "u-1",
        "metadata": {"team": "a"},
        "stream_options": {"include_usage": True},
    }
    expected = {
        "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Use metric units."}]},
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Weather in Paris and Rome?"},
                    {"text": "Also look at these:"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}},
                    {
                        "fileData": {
                            "fileUri": "https://example.com/cat.jpg?v=2",
                            "mimeType": "image/jpeg",
                        }
                    },
                    {"inlineData": {"mimeType": "audio/mp3", "data": "UklGRg=="}},
                    {"inlineData": {"mimeType": "application/pdf", "data": "JVBE"}},
                    {"inlineData": {"mimeType": "text/plain", "data": "aGkgdGhlcmU="}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "Checking both."},
                    {
                        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                        "thoughtSignature": "c2lnLWE=",
                    },
                    {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"content": "21C"}}},
                    {"functionResponse": {"name": "get_weather", "response": {"content": "18C"}}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "get_time", "args": {}},
                        "thoughtSignature": "skip_thought_signature_validator",
                    }
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "get_time", "response": {"content": "noon"}}},
                    {"text": "Thanks!"},
                ],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Weather now",
                        "parameters": GEMINI_WEATHER_PARAMS,
                    },
                    {"name": "get_time"},
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "generationConfig": {
            "temperature": 0.3,
            "maxOutputTokens": 256,
            "candidateCount": 2,
            "seed": 7,
            "presencePenalty": 0.5,
            "frequencyPenalty": -0.5,
            "logprobs": 3,
            "stopSequences": ["END"],
            "responseLogprobs": True,
            "responseMimeType": "application/json",
            "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
        },
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    }

    async def test() -> None:
        safety = {"HARM_CATEGORY_HARASSMENT": "BLOCK_NONE"}
        async with upstream(include_thoughts=True, safety_settings=safety) as (fake, provider):
            await provider.complete(body)
            assert fake.requests[0].json == expected
            # Older models get no stand-in signature; no options, no extras.
            older = {**body, "model": "gemini-2.5-pro", "stop": "END", "reasoning_effort": "none"}
            await provider.complete(older)
            sent = fake.requests[1].json
            assert sent["contents"][3]["parts"][0] == {
                "functionCall": {"name": "get_time", "args": {}}
            }
            assert sent["generationConfig"]["stopSequences"] == ["END"]
            assert sent["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}

    run(test)


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("none", {"mode": "NONE"}),
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY"}),
        (
            {"type": "function", "function": {"name": "get_time"}},
            {"mode": "ANY", "allowedFunctionNames": ["get_time"]},
        ),
        (None, None),
    ],
)
def test_tool_choice(choice: Any, config: dict[str, Any] | None) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            body = {**BODY, "tools": TOOLS}
            if choice is not None:
                body["tool_choice"] = choice
            await provider.complete(body)
            sent = fake.requests[0].json
            assert sent.get("toolConfig") == (config and {"functionCallingConfig": config})
            assert "generationConfig" in sent and "thinkingConfig" not in sent["generationConfig"]

    run(test)


def test_json_schema_becomes_a_response_schema() -> None:
    schema = {
        "$defs": {
            "Place": {
                "title": "Place",
                "type": "object",
                "properties": {
                    "name": {"type": "string", "format": "email"},
                    "near": {"$ref": "#/$defs/Place"},
                },
                "required": ["name"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {
            "place": {"$ref": "#/$defs/Place", "description": "where"},
            "kind": {"const": "city"},
            "score": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
            "tags": {
                "type": "array",
                "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "when": {"allOf": [{"type": "string", "format": "date-time"}], "title": "When"},
        },
        "required": ["place", "kind"],
        "additionalProperties": False,
    }
    expected = {
        "type": "object",
        "properties": {
            "place": {
                "type": "object",
                "description": "where",
                "properties": {"name": {"type": "string"}, "near": {"type": "object"}},
                "required": ["name"],
            },
            "kind": {"type": "string", "enum": ["city"]},
            "score": {"type": "number", "nullable": True},
            "tags": {
                "type": "array",
                "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "when": {"type": "string", "format": "date-time"},
        },
        "required": ["place", "kind"],
    }

    async def test() -> None:
        async with upstream() as (fake, provider):
            strict = {"name": "answer", "schema": schema, "strict": True}
            await provider.complete(
                {**BODY, "response_format": {"type": "json_schema", "json_schema": strict}}
            )
            await provider.complete({**BODY, "response_format": {"type": "text"}})
            first, second = (r.json["generationConfig"] for r in fake.requests)
            assert first == {
                "maxOutputTokens": 256,
                "responseMimeType": "application/json",
                "responseSchema": expected,
            }
            assert second == {"maxOutputTokens": 256}

    run(test)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"messages": [{"role": "tool", "tool_call_id": "call_x", "content": "1"}]}, "call_x"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}
                ]
            },
            "file_id",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}],
                    }
                ]
            },
            "URLs",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1]"}}],
                    }
                ]
            },
            "not a JSON object",
        ),
        ({"web_search_options": {}}, "web_search_options"),
        ({"modalities": ["text", "audio"]}, "audio"),
    ],
)
def test_what_gemini_cannot_express_is_rejected_before_sending(
    change: dict[str, Any], words: str
) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            for call, body in ((provider.complete, BODY), (provider.stream, STREAM_BODY)):
                with pytest.raises(UpstreamRejectedRequest, match=words):
                    await call({**body, **change})
            assert fake.requests == []

    run(test)


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
            assert result.usage == Usage(prompt_tokens=100, completion_tokens=50, total_tokens=150)
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


def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"choices": choices, **extra}


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


STATUS_ERRORS = [
    (400, "INVALID_ARGUMENT", UpstreamRejectedRequest),
    (400, "FAILED_PRECONDITION", UpstreamRejectedRequest),
    (404, "NOT_FOUND", UpstreamRejectedRequest),
    (403, "PERMISSION_DENIED", ProviderError),
    (429, "RESOURCE_EXHAUSTED", UpstreamUnavailable),
    (503, "UNAVAILABLE", UpstreamUnavailable),
    (504, "DEADLINE_EXCEEDED", UpstreamTimeout),
    (500, "INTERNAL", ProviderError),
]


@pytest.mark.parametrize(("status", "name", "error"), STATUS_ERRORS)
def test_error_statuses_map_for_complete_and_stream(
    status: int, name: str, error: type[Exception]
) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            for call, body in ((provider.complete, BODY), (provider.stream, STREAM_BODY)):
                fake.enqueue(Reply.error(status, name, "* GenerateContentRequest.contents: bad"))
                with pytest.raises(ProviderError) as caught:
                    await call(body)
                assert type(caught.value) is error
                assert caught.value.upstream_status == status
                assert "GenerateContentRequest.contents: bad" in caught.value.message
                assert caught.value.retry_after is None
            await provider.complete(BODY)  # the connection went back to the pool usable

    run(test)


def test_rejections_carry_the_message_verbatim_and_gemini_bodies_are_read() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply.error(400, "INVALID_ARGUMENT", "Unknown name 'foo'."))
            with pytest.raises(UpstreamRejectedRequest) as rejected:
                await provider.complete(BODY)
            assert rejected.value.message == "Unknown name 'foo'."
            fake.enqueue(
                Reply.error(400, "INVALID_ARGUMENT", "API key not valid.", reason="API_KEY_INVALID")
            )
            with pytest.raises(ProviderError, match="credentials") as caught:
                await provider.complete(BODY)
            assert type(caught.value) is ProviderError and caught.value.upstream_status == 400
            listed = [error_body(400, "INVALID_ARGUMENT", "in a list")]  # no `alt=sse`
            fake.enqueue(Reply(status=400, body=listed))
            with pytest.raises(UpstreamRejectedRequest, match=r"^in a list$"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(
                Reply(status=504, body=b"<html>Gateway Timeout</html>", content_type="text/html")
            )
            with pytest.raises(ProviderError, match="Gateway Timeout") as caught:
                await provider.complete(BODY)
            assert type(caught.value) is ProviderError  # a bare 504: the shared table
        raw = msgspec.json.encode(error_body(429, "RESOURCE_EXHAUSTED", "quota"))
        assert message_from_body(raw) == "quota"

    run(test)


def test_retry_after_from_retry_info_or_the_header() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            for call, body in ((provider.complete, BODY), (provider.stream, STREAM_BODY)):
                fake.enqueue(Reply.error(429, "RESOURCE_EXHAUSTED", "quota", retry_delay="37.5s"))
                with pytest.raises(UpstreamUnavailable) as caught:
                    await call(body)
                assert caught.value.retry_after == 37.5 and caught.value.message.endswith("quota")
            fake.enqueue(
                Reply.error(
                    429, "RESOURCE_EXHAUSTED", "q", retry_delay="37s", headers={"Retry-After": "3"}
                )
            )
            with pytest.raises(UpstreamUnavailable) as caught:
                await provider.complete(BODY)
            assert caught.value.retry_after == 3.0
            fake.enqueue(Reply.error(503, "UNAVAILABLE", "The model is overloaded."))
            with pytest.raises(UpstreamUnavailable, match="overloaded") as caught:
                await provider.complete(BODY)
            assert caught.value.retry_after is None

    run(test)


def test_blocked_prompts_are_rejected() -> None:
    blocked = response(prompt_feedback={"blockReason": "SAFETY", "safetyRatings": []})

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(body=blocked))
            with pytest.raises(UpstreamRejectedRequest, match=r"blocked the prompt \(SAFETY\)"):
                await provider.complete(BODY)
            fake.enqueue(StreamReply(events=[blocked]))
            with pytest.raises(UpstreamRejectedRequest, match="SAFETY"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(Reply(body={"candidates": [], "usageMetadata": usage()}))
            with pytest.raises(ProviderError, match="without any candidate"):
                await provider.complete(BODY)

    run(test)


def test_malformed_answers_are_provider_errors() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(body=b"{not json"))
            with pytest.raises(ProviderError, match="malformed answer"):
                await provider.complete(BODY)
            fake.enqueue(Reply(body={"candidates": "nope"}))
            with pytest.raises(ProviderError, match="not a GenerateContentResponse"):
                await provider.complete(BODY)
            fake.enqueue(Reply(status=500, body=b"garbage \xff", content_type="text/plain"))
            with pytest.raises(ProviderError, match="HTTP 500: garbage") as caught:
                await provider.complete(BODY)
            assert type(caught.value) is ProviderError
            fake.enqueue(StreamReply(events=[b"data: {broken\r\n\r\n"]))
            with pytest.raises(ProviderError, match="malformed stream event"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(StreamReply(events=[events_for()[0], b"data: {broken\r\n\r\n"]))
            stream = await provider.stream(STREAM_BODY)
            received: list[dict[str, Any]] = []
            with pytest.raises(ProviderError, match="malformed"):
                await drain(stream, received)
            await stream.aclose()
            assert [c["choices"][0]["delta"]["content"] for c in received] == ["Hello"]

    run(test)


def test_error_events_and_non_stream_answers_to_a_stream_request() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=[error_body(503, "UNAVAILABLE", "overloaded")]))
            with pytest.raises(UpstreamUnavailable, match="overloaded"):
                await provider.stream(STREAM_BODY)
            late = error_body(500, "INTERNAL", "internal error mid-way")
            fake.enqueue(StreamReply(events=[*events_for()[:2], late]))
            stream = await provider.stream(STREAM_BODY)
            received: list[dict[str, Any]] = []
            with pytest.raises(ProviderError, match="internal error mid-way"):
                await drain(stream, received)
            await stream.aclose()
            assert len(received) == 2
            fake.enqueue(Reply())
            with pytest.raises(ProviderError, match="instead of an event stream"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(StreamReply(events=[]))
            with pytest.raises(ProviderError, match="without a single chunk"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(Disconnect())
            with pytest.raises(ProviderError):
                await provider.stream(STREAM_BODY)

    run(test)


def test_stream_broken_off_or_ended_early() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(break_after=3))
            stream = await provider.stream(STREAM_BODY)
            received: list[dict[str, Any]] = []
            with pytest.raises(ProviderError) as caught:
                await drain(stream, received)
            await stream.aclose()
            assert type(caught.value) is ProviderError
            assert isinstance(caught.value.__cause__, aiohttp.ClientPayloadError)
            assert (
                "".join(c["choices"][0]["delta"]["content"] for c in received) == "Hello from the"
            )
            assert stream.usage is None
            fake.enqueue(StreamReply(events=events_for()[:2]))  # a clean end, but no finishReason
            stream = await provider.stream(STREAM_BODY)
            received = []
            with pytest.raises(ProviderError, match="before it finished"):
                await drain(stream, received)
            await stream.aclose()
            assert len(received) == 2
            await provider.complete(BODY)  # the pool recovers

    run(test)


def test_aclose_mid_stream_disconnects_the_upstream() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(chunk_delay=0.05))
            stream = await provider.stream(STREAM_BODY)
            iterator = aiter(stream)
            await anext(iterator)
            await anext(iterator)
            await stream.aclose()
            await stream.aclose()
            await fake.wait_for_disconnects(1)
            with pytest.raises(StopAsyncIteration):
                await anext(iterator)

    run(test)


def test_timeouts() -> None:
    async def test() -> None:
        async with upstream(timeout_seconds=0.2, stream_read_timeout_seconds=0.2) as (
            fake,
            provider,
        ):
            fake.enqueue(Reply(delay=1.0))
            with pytest.raises(UpstreamTimeout):
                await provider.complete(BODY)
            fake.enqueue(StreamReply(delay=1.0))  # slow first byte: not even the headers
            with pytest.raises(UpstreamTimeout):
                await provider.stream(STREAM_BODY)
            fake.enqueue(StreamReply(chunk_delay=1.0))  # headers, then no first event
            with pytest.raises(UpstreamTimeout):
                await provider.stream(STREAM_BODY)
            fake.enqueue(StreamReply(stall_after=2))
            stream = await provider.stream(STREAM_BODY)
            received: list[dict[str, Any]] = []
            with pytest.raises(UpstreamTimeout):  # mid-stream: from the iterator
                await drain(stream, received)
            await stream.aclose()
            assert len(received) == 2
            await fake.wait_for_disconnects(4)

    run(test)


def test_connection_refused_is_unavailable() -> None:
    async def test() -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        provider = create("gem", Options(base_url=f"http://127.0.0.1:{port}/v1beta"))
        try:
            for call in (provider.complete, provider.stream):
                with pytest.raises(UpstreamUnavailable) as caught:
                    await call(BODY)
                assert isinstance(caught.value.__cause__, aiohttp.ClientConnectorError)
        finally:
            await provider.close()

    run(test)
