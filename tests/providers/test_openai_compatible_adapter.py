"""OpenAI-compatible servers (vLLM, Ollama, hosted APIs): the OpenAI wire format with each
server's differences as options; the usage a server did not report is left to the gateway
to count (gateway.chat.usage)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from providers.base import ChatProvider
from providers.errors import UpstreamUnavailable
from providers.openai_compatible import Options, create
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


def test_a_stream_without_usage_reports_none() -> None:
    """The gateway counts what it delivered (gateway.chat.usage), as for every upstream."""

    async def test() -> None:
        async with server(stream_options=False) as (fake, provider):
            chunks, usage = await _collect(provider, STREAM_BODY)
        text = "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
        )
        assert text == fake.text
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
        assert usage is None and not any("usage" in c for c in chunks)

    run(test)


def test_the_recorded_ollama_tool_stream_passes_as_it_came() -> None:
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
        assert usage is None

    run(test)


def test_a_whole_answer_without_usage_reports_zero() -> None:
    answer = default_completion(BODY, "Hi there, how can I help?")
    del answer["usage"]

    async def test() -> None:
        async with server() as (fake, provider):
            fake.enqueue(Reply(body=answer))
            completion = await provider.complete(BODY)
        assert "usage" not in completion.body
        assert completion.usage.completion_tokens == 0

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
