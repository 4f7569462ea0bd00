"""OpenAI-compatible servers (vLLM, Ollama, hosted APIs): the OpenAI wire format with each
server's differences as options, and the usage a server did not report counted by the
adapter and marked `estimated`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from providers.base import ChatProvider
from providers.errors import ProviderError, UpstreamUnavailable
from providers.openai_compatible import Options, create
from providers.openai_compatible.usage import prompt_tokens
from tests.fakes.openai_upstream import FakeOpenAI, Reply, StreamReply, default_completion
from tests.fakes.recorded import load
from tests.providers.adapter_checks import assert_refused_is_unavailable, drain, run

BODY: dict[str, Any] = {
    "model": "qwen2.5-coder:7b",
    "messages": [{"role": "user", "content": "hello"}],
    "max_completion_tokens": 64,
}
STREAM_BODY = {**BODY, "stream": True, "stream_options": {"include_usage": True}}


@asynccontextmanager
async def server(**options: Any) -> AsyncIterator[tuple[FakeOpenAI, ChatProvider]]:
    async with FakeOpenAI() as fake:
        provider = create("local", Options(base_url=fake.base_url, **options))
        try:
            yield fake, provider
        finally:
            await provider.close()


async def _collect(
    provider: ChatProvider, body: dict[str, Any]
) -> tuple[list[dict[str, Any]], Any]:
    stream = await provider.stream(body)
    chunks: list[dict[str, Any]] = []
    try:
        await drain(stream, chunks)
        return chunks, stream.usage
    finally:
        await stream.aclose()


def test_a_server_that_takes_openais_body_gets_it_as_it_is() -> None:
    async def test() -> None:
        async with server() as (fake, provider):
            completion = await provider.complete(BODY)
            chunks, usage = await _collect(provider, STREAM_BODY)
        assert fake.requests[0].json == BODY
        assert fake.requests[1].json == STREAM_BODY
        assert "authorization" not in fake.requests[0].headers  # no key: nothing sent
        assert completion.body["usage"]["prompt_tokens"] == 12
        assert "estimated" not in completion.body["usage"]
        assert chunks[-1]["usage"]["total_tokens"] == 18
        assert usage.prompt_tokens == 12 and not usage.partial

    run(test)


def test_the_servers_differences_as_options() -> None:
    async def test() -> None:
        async with server(
            stream_options=False,
            max_tokens_field="max_tokens",
            drop_fields=["parallel_tool_calls", "store"],
            extra_headers={"X-Tenant": "team-a"},
            api_key="local-key",
        ) as (fake, provider):
            await _collect(provider, {**STREAM_BODY, "parallel_tool_calls": False, "store": True})
        sent = fake.requests[0]
        assert sent.json == {
            "model": "qwen2.5-coder:7b",
            "messages": [{"role": "user", "content": "hello"}],
            "max_tokens": 64,
            "stream": True,
        }
        assert sent.headers["x-tenant"] == "team-a"
        assert sent.headers["authorization"] == "Bearer local-key"

    run(test)


def test_a_stream_without_usage_is_counted_and_marked_estimated() -> None:
    async def test() -> None:
        async with server(stream_options=False) as (fake, provider):
            chunks, usage = await _collect(provider, STREAM_BODY)
        text = "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
        )
        assert text == fake.text
        tail = chunks[-1]
        assert tail["choices"] == [] and tail["id"] == "chatcmpl-fake"
        expected_prompt = prompt_tokens(STREAM_BODY)
        assert expected_prompt == 3 + 4 + 2  # "hello": 5 characters, 2 tokens
        output = -(-len(fake.text) // 4)
        assert tail["usage"] == {
            "prompt_tokens": expected_prompt,
            "completion_tokens": output,
            "total_tokens": expected_prompt + output,
            "estimated": True,
        }
        assert (usage.prompt_tokens, usage.completion_tokens) == (expected_prompt, output)
        assert not usage.partial

    run(test)


def test_the_recorded_ollama_tool_stream_is_counted() -> None:
    events = [b"data: " + e.encode() + b"\n\n" for e in load("ollama_tool_stream")["events"]]
    tools = [
        {"type": "function", "function": {"name": "run_command", "parameters": {"type": "object"}}}
    ]

    async def test() -> None:
        async with server(stream_options=False) as (fake, provider):
            fake.enqueue(StreamReply(chunks=events))
            chunks, usage = await _collect(provider, {**STREAM_BODY, "tools": tools})
        calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[:2]]
        assert [c["function"]["arguments"] for c in calls] == [
            '{"command":"ls"}',
            '{"command":"ls -l"}',
        ]
        assert chunks[2]["choices"][0]["finish_reason"] == "tool_calls"
        assert chunks[-1]["usage"]["estimated"] is True
        # "run_command" + its arguments, twice: (11 + 16) + (11 + 19) characters
        assert usage.completion_tokens == -(-(11 + 16 + 11 + 19) // 4)
        assert usage.prompt_tokens == prompt_tokens({**STREAM_BODY, "tools": tools})

    run(test)


def test_a_whole_answer_without_usage_is_counted_too() -> None:
    answer = default_completion(BODY, "Hi there, how can I help?")
    del answer["usage"]

    async def test() -> None:
        async with server() as (fake, provider):
            fake.enqueue(Reply(body=answer))
            completion = await provider.complete(BODY)
        assert completion.body["usage"] == {
            "prompt_tokens": 9,
            "completion_tokens": 7,
            "total_tokens": 16,
            "estimated": True,
        }
        assert completion.usage.completion_tokens == 7

    run(test)


def test_a_stream_cut_short_reports_what_was_delivered_as_partial() -> None:
    async def test() -> None:
        async with server(stream_options=False) as (fake, provider):
            fake.enqueue(StreamReply(break_after=3))
            stream = await provider.stream(STREAM_BODY)
            chunks: list[dict[str, Any]] = []
            with pytest.raises(ProviderError):
                await drain(stream, chunks)
            usage = stream.usage
            await stream.aclose()
        delivered = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert delivered == "Hello from"
        assert usage is not None and usage.partial
        assert usage.completion_tokens == 3  # 10 characters, but never less than a token a chunk
        assert usage.prompt_tokens == 9

    run(test)


def test_server_errors_are_the_shared_table() -> None:
    async def test() -> None:
        async with server() as (fake, provider):
            fake.enqueue(Reply.error(503, "model is loading"))
            with pytest.raises(UpstreamUnavailable, match="model is loading"):
                await provider.complete(BODY)

    run(test)


def test_a_refused_connection_is_unavailable() -> None:
    run(lambda: assert_refused_is_unavailable(lambda url: create("x", Options(base_url=url)), BODY))


def test_the_request_fields_that_cannot_be_dropped() -> None:
    options = Options(base_url="http://localhost:8000/v1", drop_fields=["seed", "messages"])
    assert options.config_problems({}) == [("drop_fields[1]", "'messages' cannot be left out")]
