"""The Anthropic adapter against a real local fake Messages API: translation, streams, errors."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import msgspec
import pytest

from providers.anthropic import Options, create
from providers.base import ChatProvider, ChatStream, Usage
from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.registry import serves, spec_for
from tests.fakes.anthropic_upstream import (
    DEFAULT_TEXT,
    Disconnect,
    FakeAnthropic,
    Reply,
    StreamReply,
    error_event,
    events_for,
    message,
    sse,
    text,
    thinking,
    tool_use,
)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


@asynccontextmanager
async def upstream(**options: Any) -> AsyncIterator[tuple[FakeAnthropic, ChatProvider]]:
    """A fake upstream and a provider pointed at it, both closed afterwards."""
    async with FakeAnthropic() as fake:
        provider = create("claude", Options(base_url=fake.base_url, **options))
        try:
            yield fake, provider
        finally:
            await provider.close()


BODY: dict[str, Any] = {
    "model": "claude-upstream",
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "max_completion_tokens": 256,
}
STREAM_BODY: dict[str, Any] = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": True,
    },
}
TOOL_MESSAGE = message(
    text("Let me check."),
    tool_use("toolu_1", "get_weather", {"city": "Paris"}),
    tool_use("toolu_2", "get_weather", {"city": "Lyon", "days": [1, 2]}),
    stop_reason="tool_use",
)


async def sent(provider: ChatProvider, fake: FakeAnthropic, body: dict[str, Any]) -> Any:
    """What the upstream received for `body` (a complete call)."""
    await provider.complete(body)
    return fake.requests[-1].json


async def collect(stream: ChatStream) -> list[dict[str, Any]]:
    try:
        return [chunk async for chunk in stream]
    finally:
        await stream.aclose()


def reassemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """A streamed answer put back together the way an OpenAI client does."""
    content, reasoning, finish = "", "", None
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or ():
                into = calls.setdefault(call["index"], {"arguments": ""})
                into.update({k: call[k] for k in ("id", "type") if k in call})
                function = call.get("function") or {}
                if "name" in function:
                    into["name"] = function["name"]
                into["arguments"] += function.get("arguments") or ""
            finish = choice["finish_reason"] or finish
    return {"content": content, "reasoning": reasoning, "calls": calls, "finish": finish}


def test_registry_and_options() -> None:
    spec = spec_for("anthropic")
    assert serves("anthropic", "chat") and not serves("anthropic", "text_to_image")
    options = msgspec.convert({}, spec.options_type)
    assert isinstance(options, Options)
    assert options.base_url == "https://api.anthropic.com/v1"
    assert (options.anthropic_version, options.default_max_tokens) == ("2023-06-01", 4096)
    with pytest.raises(msgspec.ValidationError, match="anthropic_versoin"):
        msgspec.convert({"anthropic_versoin": "x"}, spec.options_type)
    with pytest.raises(msgspec.ValidationError, match="default_max_tokens"):
        msgspec.convert({"default_max_tokens": 0}, spec.options_type)


def test_headers_url_and_a_plain_request() -> None:
    async def test() -> None:
        async with upstream(api_key="sk-ant-test", anthropic_version="2099-01-01") as (
            fake,
            provider,
        ):
            await provider.complete(BODY)
            stream = await provider.stream(STREAM_BODY)
            await collect(stream)
            await provider.complete(BODY)
            plain, streamed, again = fake.requests
            assert (plain.method, plain.path) == ("POST", "/v1/messages")
            assert plain.headers["x-api-key"] == "sk-ant-test"
            assert plain.headers["anthropic-version"] == "2099-01-01"
            assert plain.headers["content-type"] == "application/json"
            assert "authorization" not in plain.headers
            assert plain.json == {
                "model": "claude-upstream",
                "max_tokens": 256,
                "messages": [{"role": "user", "content": [text("What is the weather in Paris?")]}],
            }
            assert streamed.json == {**plain.json, "stream": True}
            # One pooled keep-alive connection served all three calls.
            assert plain.client_port == streamed.client_port == again.client_port

    run(test)


def test_system_lifted_turns_merged_tools_and_results() -> None:
    body = {
        "model": "claude-upstream",
        "max_completion_tokens": 300,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
            {"role": "user", "content": "Weather in Paris and Lyon?", "name": "ann"},
            {"role": "user", "content": [{"type": "text", "text": "Both please."}]},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "dropped: no signature to send back",
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "toolu_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
            {"role": "tool", "tool_call_id": "toolu_2", "content": [{"type": "text", "text": "x"}]},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [WEATHER_TOOL, {"type": "function", "function": {"name": "noop"}}],
        "tool_choice": "required",
        "parallel_tool_calls": False,
    }

    async def test() -> None:
        async with upstream() as (fake, provider):
            got = await sent(provider, fake, body)
            assert got["system"] == "Be brief.\n\nUse metric units."
            assert got["messages"] == [
                {
                    "role": "user",
                    "content": [text("Weather in Paris and Lyon?"), text("Both please.")],
                },
                {
                    "role": "assistant",
                    "content": [
                        tool_use("toolu_1", "get_weather", {"city": "Paris"}),
                        tool_use("toolu_2", "get_weather", {}),
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "x"},
                        text("Thanks"),
                    ],
                },
            ]
            assert got["tools"] == [
                {
                    "name": "get_weather",
                    "description": "Weather of a city",
                    "input_schema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                    },
                },
                {"name": "noop", "input_schema": {"type": "object", "properties": {}}},
            ]
            assert got["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}

    run(test)


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("none", None, {"type": "none"}),
        ("auto", None, {"type": "auto"}),
        (None, None, None),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", True, {"type": "any"}),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            None,
            {"type": "tool", "name": "get_weather"},
        ),
    ],
)
def test_tool_choice(choice: Any, parallel: Any, expected: Any) -> None:
    body = {**BODY, "tools": [WEATHER_TOOL]}
    if choice is not None:
        body["tool_choice"] = choice
    if parallel is not None:
        body["parallel_tool_calls"] = parallel

    async def test() -> None:
        async with upstream() as (fake, provider):
            got = await sent(provider, fake, body)
            assert got.get("tool_choice") == expected

    run(test)


def test_images_sampling_stop_metadata_and_dropped_fields() -> None:
    image_parts = [
        {"type": "text", "text": "Compare"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg", "detail": "low"}},
    ]
    body = {
        **BODY,
        "messages": [{"role": "user", "content": image_parts}],
        "temperature": 1.7,
        "stop": "END",
        "user": "user-42",
        "metadata": {"user": "ignored: user wins", "team": "dropped"},
        "seed": 7,
        "logprobs": True,
        "top_logprobs": 2,
        "frequency_penalty": 0.5,
        "presence_penalty": 0.5,
        "logit_bias": {"50256": -100},
        "store": True,
        "service_tier": "auto",
        "prompt_cache_key": "k",
        "n": 1,
        "response_format": {"type": "text"},
    }

    async def test() -> None:
        async with upstream(default_max_tokens=77) as (fake, provider):
            got = await sent(provider, fake, body)
            assert got["messages"][0]["content"] == [
                text("Compare"),
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
            ]
            assert got["temperature"] == 1.0  # clamped into Anthropic's 0..1
            assert got["stop_sequences"] == ["END"]
            assert got["metadata"] == {"user_id": "user-42"}
            assert set(got) == {
                "model",
                "max_tokens",
                "messages",
                "temperature",
                "stop_sequences",
                "metadata",
            }
            minimal = {"model": "m", "messages": BODY["messages"], "top_p": 0.9, "stop": ["a", "b"]}
            got = await sent(provider, fake, {**minimal, "safety_identifier": "sid", "user": "u"})
            assert got["max_tokens"] == 77  # default_max_tokens when the request sets none
            assert got["top_p"] == 0.9 and "temperature" not in got
            assert got["stop_sequences"] == ["a", "b"]
            assert got["metadata"] == {"user_id": "sid"}
            got = await sent(provider, fake, {**minimal, "metadata": {"user": "from-metadata"}})
            assert got["metadata"] == {"user_id": "from-metadata"}

    run(test)


def test_reasoning_effort_becomes_a_thinking_budget() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            body = {**BODY, "max_completion_tokens": 4000}
            got = await sent(provider, fake, {**body, "reasoning_effort": "medium"})
            assert got["thinking"] == {"type": "enabled", "budget_tokens": 3999}
            got = await sent(provider, fake, {**body, "reasoning_effort": "low"})
            assert got["thinking"] == {"type": "enabled", "budget_tokens": 2048}
            got = await sent(provider, fake, {**body, "reasoning_effort": "none"})
            assert "thinking" not in got
            with pytest.raises(UpstreamRejectedRequest, match="reasoning_effort"):
                await provider.complete({**BODY, "reasoning_effort": "high"})  # 256 < 1024

    run(test)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n": 2}, "n"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"modalities": ["text", "audio"]}, "audio"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"web_search_options": {}}, "web_search_options"),
        ({"tools": [{"type": "custom", "custom": {"name": "x"}}]}, r"tools\[0\]\.type"),
        ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, r"messages\[0\]\.role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            r"messages\[0\]\.content\[0\]\.type",
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
            r"image_url\.url",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "t", "function": {"name": "f", "arguments": "{x"}}],
                    }
                ]
            },
            r"tool_calls\[0\]\.function\.arguments: is not valid JSON",
        ),
        ({"messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
    ],
)
def test_unsupported_requests_are_rejected_before_sending(
    change: dict[str, Any], field: str
) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            for call in (provider.complete, provider.stream):
                with pytest.raises(UpstreamRejectedRequest, match=field):
                    await call({**BODY, **change})
            assert fake.requests == []

    run(test)


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
            assert result.usage == Usage(prompt_tokens=130, completion_tokens=30, total_tokens=160)

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
            assert stream.usage == Usage(prompt_tokens=77, completion_tokens=40, total_tokens=117)

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


async def drain(stream: ChatStream, into: list[dict[str, Any]]) -> None:
    async for chunk in stream:
        into.append(chunk)


def test_error_event_mid_stream_raises_after_the_chunks_before_it() -> None:
    events = events_for(message())
    cut = [*events[:5], error_event("overloaded_error", "Overloaded"), *events[5:]]

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=cut))
            stream = await provider.stream(STREAM_BODY)
            received: list[dict[str, Any]] = []
            with pytest.raises(UpstreamUnavailable, match="overloaded_error: Overloaded") as caught:
                await drain(stream, received)
            await stream.aclose()
            assert caught.value.upstream_status == 529
            assert reassemble(received)["content"] == "Hello from"
            assert stream.usage is None  # never reached message_delta
            await provider.complete(BODY)  # the pool recovers

    run(test)


@pytest.mark.parametrize(
    ("kind", "error", "status"),
    [
        ("overloaded_error", UpstreamUnavailable, 529),
        ("rate_limit_error", UpstreamUnavailable, 429),
        ("invalid_request_error", UpstreamRejectedRequest, 400),
        ("api_error", ProviderError, 500),
        ("something_new", ProviderError, 500),
    ],
)
def test_error_event_before_any_content_raises_from_stream(
    kind: str, error: type[Exception], status: int
) -> None:
    events = events_for(message())
    early = [events[0], events[1], error_event(kind, "went wrong")]

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=early))
            with pytest.raises(ProviderError, match="went wrong") as caught:
                await provider.stream(STREAM_BODY)
            assert type(caught.value) is error
            assert caught.value.upstream_status == status
            body = {"type": "error", "error": {"type": kind, "message": "went wrong"}}
            fake.enqueue(Reply(body=body))  # the same object in a 200 JSON answer
            with pytest.raises(ProviderError, match="went wrong") as caught:
                await provider.complete(BODY)
            assert type(caught.value) is error

    run(test)


def test_stream_broken_off_raises_after_the_chunks_that_arrived() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(break_after=6))  # start, ping, block start, 3 words
            stream = await provider.stream(STREAM_BODY)
            received: list[dict[str, Any]] = []
            with pytest.raises(ProviderError) as caught:
                await drain(stream, received)
            await stream.aclose()
            assert type(caught.value) is ProviderError
            assert isinstance(caught.value.__cause__, aiohttp.ClientPayloadError)
            assert reassemble(received)["content"] == "Hello from the"
            await provider.complete(BODY)

    run(test)


def test_stream_cut_after_the_stop_reason_still_ends_normally() -> None:
    events = events_for(message())

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=events[:-1]))  # no message_stop
            chunks = await collect(await provider.stream(STREAM_BODY))
            assert reassemble(chunks) == {
                "content": DEFAULT_TEXT,
                "reasoning": "",
                "calls": {},
                "finish": "stop",
            }
            assert chunks[-1]["usage"]["total_tokens"] == 18
            fake.enqueue(StreamReply(events=events[:5]))  # ends in the middle, cleanly
            stream = await provider.stream(STREAM_BODY)
            with pytest.raises(ProviderError, match="before it finished"):
                await drain(stream, [])
            await stream.aclose()

    run(test)


def test_aclose_mid_stream_disconnects_the_upstream() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(event_delay=0.05))
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


STATUS_ERRORS = [
    (400, "invalid_request_error", UpstreamRejectedRequest),
    (404, "not_found_error", UpstreamRejectedRequest),
    (413, "request_too_large", UpstreamRejectedRequest),
    (401, "authentication_error", ProviderError),
    (403, "permission_error", ProviderError),
    (429, "rate_limit_error", UpstreamUnavailable),
    (529, "overloaded_error", UpstreamUnavailable),
    (500, "api_error", ProviderError),
]


@pytest.mark.parametrize(("status", "kind", "error"), STATUS_ERRORS)
def test_error_statuses_map_for_complete_and_stream(
    status: int, kind: str, error: type[Exception]
) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            for call, body in ((provider.complete, BODY), (provider.stream, STREAM_BODY)):
                fake.enqueue(Reply.error(status, kind, "messages.0.content: Field required"))
                with pytest.raises(ProviderError) as caught:
                    await call(body)
                assert type(caught.value) is error
                assert caught.value.upstream_status == status
                assert "messages.0.content: Field required" in caught.value.message
            await provider.complete(BODY)  # the connection went back to the pool usable

    run(test)


def test_rate_limit_keeps_retry_after_and_rejections_keep_the_message() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            for call, body in ((provider.complete, BODY), (provider.stream, STREAM_BODY)):
                fake.enqueue(
                    Reply.error(429, "rate_limit_error", "slow down", headers={"retry-after": "7"})
                )
                with pytest.raises(UpstreamUnavailable, match="slow down") as caught:
                    await call(body)
                assert caught.value.retry_after == 7.0
            fake.enqueue(Reply.error(529, "overloaded_error", "Overloaded"))
            with pytest.raises(UpstreamUnavailable) as caught:
                await provider.complete(BODY)
            assert caught.value.retry_after is None
            fake.enqueue(Reply.error(400, "invalid_request_error", "max_tokens: too large"))
            with pytest.raises(UpstreamRejectedRequest) as rejected:
                await provider.complete(BODY)
            assert rejected.value.message == "max_tokens: too large"

    run(test)


def test_malformed_answers_are_provider_errors() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(body=b"{not json"))
            with pytest.raises(ProviderError, match="malformed JSON"):
                await provider.complete(BODY)
            fake.enqueue(Reply(body={"type": "message", "content": "not a list"}))
            with pytest.raises(ProviderError, match="malformed JSON"):
                await provider.complete(BODY)
            fake.enqueue(Reply(body={"type": "completion", "completion": "legacy"}))
            with pytest.raises(ProviderError, match="not a message"):
                await provider.complete(BODY)
            fake.enqueue(
                Reply(status=500, body=b"<html>bad gateway</html>", content_type="text/html")
            )
            with pytest.raises(ProviderError, match="bad gateway") as caught:
                await provider.complete(BODY)
            assert caught.value.upstream_status == 500
            fake.enqueue(StreamReply(events=[b"event: message_start\ndata: {broken\n\n"]))
            with pytest.raises(ProviderError, match="malformed stream event"):
                await provider.stream(STREAM_BODY)
            events = events_for(message())
            fake.enqueue(StreamReply(events=[*events[:4], b"data: {broken\n\n"]))
            stream = await provider.stream(STREAM_BODY)
            with pytest.raises(ProviderError, match="malformed stream event"):
                await drain(stream, [])
            await stream.aclose()

    run(test)


def test_non_stream_answers_to_a_stream_request() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply())
            with pytest.raises(ProviderError, match="instead of an event stream"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(
                Reply(
                    body={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
                )
            )
            with pytest.raises(UpstreamUnavailable, match="busy"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(StreamReply(events=[]))  # headers, then a clean end
            with pytest.raises(ProviderError, match="ended the stream before it finished"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(Disconnect())
            with pytest.raises(ProviderError):
                await provider.stream(STREAM_BODY)

    run(test)


def test_connection_refused_is_unavailable() -> None:
    async def test() -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        provider = create("claude", Options(base_url=f"http://127.0.0.1:{port}/v1"))
        try:
            for call in (provider.complete, provider.stream):
                with pytest.raises(UpstreamUnavailable) as caught:
                    await call(BODY)
                assert isinstance(caught.value.__cause__, aiohttp.ClientConnectorError)
        finally:
            await provider.close()

    run(test)


def test_timeouts_slow_first_byte_and_stalled_stream() -> None:
    async def test() -> None:
        async with upstream(timeout_seconds=0.2, stream_read_timeout_seconds=0.2) as (
            fake,
            provider,
        ):
            fake.enqueue(Reply(delay=1.0))
            with pytest.raises(UpstreamTimeout):
                await provider.complete(BODY)
            fake.enqueue(StreamReply(event_delay=1.0))
            with pytest.raises(UpstreamTimeout):  # before the first chunk: from stream()
                await provider.stream(STREAM_BODY)
            fake.enqueue(StreamReply(stall_after=5))
            stream = await provider.stream(STREAM_BODY)
            received: list[dict[str, Any]] = []
            with pytest.raises(UpstreamTimeout):  # mid-stream: from the iterator
                await drain(stream, received)
            await stream.aclose()
            assert reassemble(received)["content"] == "Hello from"
            await fake.wait_for_disconnects(3)

    run(test)


def test_fake_runs_in_a_thread_for_sync_tests() -> None:
    fake = FakeAnthropic()
    base_url, stop = fake.start_in_thread()
    try:

        async def call() -> str:
            provider = create("claude", Options(base_url=base_url, api_key="k"))
            try:
                result = await provider.complete(BODY)
            finally:
                await provider.close()
            content: str = result.body["choices"][0]["message"]["content"]
            return content

        assert asyncio.run(call()) == DEFAULT_TEXT
        assert fake.requests[0].headers["x-api-key"] == "k"
    finally:
        stop()
