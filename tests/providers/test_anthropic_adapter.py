"""The Anthropic adapter against a real local fake Messages API: its options, and what the
upstream receives (system, turns, tools, tool choice, images, thinking), or what is refused before
sending."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from providers.anthropic import Options, create
from providers.errors import UpstreamRejectedRequest
from providers.registry import serves, spec_for
from tests.fakes.anthropic_upstream import DEFAULT_TEXT, FakeAnthropic, text, tool_use
from tests.providers.anthropic_support import BODY, STREAM_BODY, collect, run, sent, upstream

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": True,
    },
}


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
