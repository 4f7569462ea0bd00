"""The OpenAI adapter against a real local fake upstream: pass-through, streams, errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

from providers.base import ChatProvider, Usage
from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.http1 import BrokenBody
from providers.openai import Options, create
from providers.registry import spec_for
from tests.fakes import Disconnect, FakeOpenAI, Reply, StreamReply, default_chunks
from tests.providers.adapter_checks import assert_refused_is_unavailable, drain, run


@asynccontextmanager
async def upstream(**options: Any) -> AsyncIterator[tuple[FakeOpenAI, ChatProvider]]:
    """A fake upstream and a provider pointed at it, both closed afterwards."""
    async with FakeOpenAI() as fake:
        provider = create("openai", Options(base_url=fake.base_url, **options))
        try:
            yield fake, provider
        finally:
            await provider.close()


BODY: dict[str, Any] = {
    "model": "gpt-upstream",
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "max_completion_tokens": 256,
}
STREAM_BODY: dict[str, Any] = {**BODY, "stream": True, "stream_options": {"include_usage": True}}

RICH_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-rich",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "gpt-upstream-2025",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "reasoning_content": "The user wants weather; call the tool.",
                "audio": {"id": "audio_1", "data": "UklGRg==", "expires_at": 1, "transcript": "x"},
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            "logprobs": {
                "content": [{"token": "x", "logprob": -0.1, "bytes": [120], "top_logprobs": []}],
                "refusal": None,
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {
        "prompt_tokens": 21,
        "completion_tokens": 9,
        "total_tokens": 30,
        "prompt_tokens_details": {"cached_tokens": 16, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 5, "accepted_prediction_tokens": 0},
    },
    "system_fingerprint": "fp_upstream",
    "service_tier": "default",
    "a_field_from_the_future": {"kept": True},
}


def test_registry_and_options_validation() -> None:
    spec = spec_for("openai")
    with pytest.raises(msgspec.ValidationError, match="timout_seconds"):
        msgspec.convert({"base_url": "http://x/v1", "timout_seconds": 3}, spec.options_type)
    with pytest.raises(msgspec.ValidationError, match="base_url"):
        msgspec.convert({"base_url": "api.openai.com/v1"}, spec.options_type)
    with pytest.raises(msgspec.ValidationError, match="max_connections"):
        msgspec.convert({"base_url": "http://x", "max_connections": 0}, spec.options_type)


def test_the_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Resolution itself is tested on the shared options (tests/providers/test_options.py).
    monkeypatch.delenv("GATEWAY_TEST_UPSTREAM_KEY", raising=False)
    options = Options(base_url="http://x", api_key_env="GATEWAY_TEST_UPSTREAM_KEY")
    with pytest.raises(ValueError, match="'GATEWAY_TEST_UPSTREAM_KEY' is not set"):
        create("openai", options)
    monkeypatch.setenv("GATEWAY_TEST_UPSTREAM_KEY", "sk-env")

    async def test() -> None:
        async with upstream(api_key="sk-config", api_key_env="GATEWAY_TEST_UPSTREAM_KEY") as (
            fake,
            provider,
        ):
            await provider.complete(BODY)
            assert fake.requests[0].headers["authorization"] == "Bearer sk-env"

    run(test)


def test_complete_passes_every_field_through() -> None:
    async def test() -> None:
        async with upstream(api_key="sk-test") as (fake, provider):
            fake.enqueue(Reply(body=RICH_COMPLETION))
            result = await provider.complete(BODY)
            assert result.body == RICH_COMPLETION
            assert result.usage == Usage(
                prompt_tokens=21, completion_tokens=9, total_tokens=30, cached_tokens=16
            )

    run(test)


def test_the_upstream_receives_the_body_and_headers() -> None:
    async def test() -> None:
        async with upstream(api_key="sk-test", extra_headers={"OpenAI-Organization": "org-1"}) as (
            fake,
            provider,
        ):
            await provider.complete(BODY)
            stream = await provider.stream(STREAM_BODY)
            async for _ in stream:
                pass
            await stream.aclose()
            await provider.complete(BODY)
            plain, streamed, again = fake.requests
            assert plain.path == "/v1/chat/completions" and plain.method == "POST"
            assert plain.json == BODY
            assert streamed.json == STREAM_BODY
            assert streamed.json["stream_options"] == {"include_usage": True}
            assert plain.headers["authorization"] == "Bearer sk-test"
            assert plain.headers["content-type"] == "application/json"
            assert plain.headers["openai-organization"] == "org-1"
            # One pooled keep-alive connection served all three calls.
            assert plain.client_port == streamed.client_port == again.client_port

    run(test)


def test_no_authorization_without_a_key() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            await provider.complete(BODY)
            assert "authorization" not in fake.requests[0].headers

    run(test)


def test_stream_yields_chunks_in_order_and_sets_usage() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            stream = await provider.stream(STREAM_BODY)
            chunks = [chunk async for chunk in stream]
            await stream.aclose()
            await stream.aclose()
            assert chunks == default_chunks(STREAM_BODY, fake.text)
            assert stream.usage == Usage(prompt_tokens=12, completion_tokens=6, total_tokens=18)

    run(test)


def test_stream_framing_from_the_wire() -> None:
    async def test() -> None:
        chunks = default_chunks(STREAM_BODY)
        wire = b"".join(b"data: " + msgspec.json.encode(c) + b"\r\n\r\n" for c in chunks)
        pieces = [b": keep-alive\r\n\r\n", wire[:7], wire[7:100], wire[100:]]
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(chunks=pieces, chunk_delay=0.01))
            stream = await provider.stream(STREAM_BODY)
            assert [chunk async for chunk in stream] == chunks
            await stream.aclose()

    run(test)


def test_stream_broken_off_raises_after_the_chunks_that_arrived() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(break_after=3))
            stream = await provider.stream(STREAM_BODY)
            received: list[dict[str, Any]] = []
            with pytest.raises(ProviderError) as caught:
                await drain(stream, received)
            await stream.aclose()
            assert type(caught.value) is ProviderError
            assert isinstance(caught.value.__cause__, BrokenBody)
            assert received == default_chunks(STREAM_BODY, fake.text)[:3]
            await provider.complete(BODY)  # the pool recovers

    run(test)


def test_stream_cut_after_finish_without_done_still_ends_normally() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(done=False))
            stream = await provider.stream(STREAM_BODY)
            assert len([c async for c in stream]) == len(default_chunks(STREAM_BODY))
            await stream.aclose()
            fake.enqueue(StreamReply(chunks=default_chunks(BODY)[:2], done=False))
            stream = await provider.stream(STREAM_BODY)
            with pytest.raises(ProviderError, match="before it finished"):
                await drain(stream, [])
            await stream.aclose()

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


STATUS_ERRORS = [
    (400, UpstreamRejectedRequest),
    (404, UpstreamRejectedRequest),
    (422, UpstreamRejectedRequest),
    (401, ProviderError),
    (403, ProviderError),
    (429, UpstreamUnavailable),
    (503, UpstreamUnavailable),
    (529, UpstreamUnavailable),
    (500, ProviderError),
    (502, ProviderError),
    (504, ProviderError),
]


@pytest.mark.parametrize(("status", "error"), STATUS_ERRORS)
def test_error_statuses_map_for_complete_and_stream(status: int, error: type[Exception]) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            for call in (provider.complete, provider.stream):
                fake.enqueue(Reply.error(status, "The model `gpt-x` does not exist"))
                with pytest.raises(ProviderError) as caught:
                    await call(STREAM_BODY if call == provider.stream else BODY)
                assert type(caught.value) is error
                assert caught.value.upstream_status == status
                assert "does not exist" in caught.value.message
            await provider.complete(BODY)  # the connection went back to the pool usable

    run(test)


def test_retry_after_is_kept_for_complete_and_stream() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            for call in (provider.complete, provider.stream):
                body = {"error": {"message": "slow down", "type": "rate_limit_error"}}
                fake.enqueue(Reply(status=429, body=body, headers={"Retry-After": "7"}))
                with pytest.raises(UpstreamUnavailable) as caught:
                    await call(STREAM_BODY if call == provider.stream else BODY)
                assert caught.value.retry_after == 7.0
                assert "slow down" in caught.value.message
            fake.enqueue(Reply.error(503, "overloaded"))
            with pytest.raises(UpstreamUnavailable) as caught:
                await provider.complete(BODY)
            assert caught.value.retry_after is None

    run(test)


def test_rejected_request_carries_the_upstream_message_verbatim() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply.error(400, "max_completion_tokens is too large"))
            with pytest.raises(UpstreamRejectedRequest) as caught:
                await provider.complete(BODY)
            assert caught.value.message == "max_completion_tokens is too large"
            fake.enqueue(Reply(status=422, body=b"plain text failure", content_type="text/plain"))
            with pytest.raises(UpstreamRejectedRequest, match="plain text failure"):
                await provider.complete(BODY)

    run(test)


def test_connection_refused_is_unavailable() -> None:
    def make(base_url: str) -> ChatProvider:
        return create("openai", Options(base_url=base_url))

    run(lambda: assert_refused_is_unavailable(make, BODY))


def test_timeouts() -> None:
    async def test() -> None:
        async with upstream(timeout_seconds=0.2, stream_read_timeout_seconds=0.2) as (
            fake,
            provider,
        ):
            fake.enqueue(Reply(delay=1.0))
            with pytest.raises(UpstreamTimeout):
                await provider.complete(BODY)
            fake.enqueue(StreamReply(chunk_delay=1.0))
            with pytest.raises(UpstreamTimeout):  # before the first chunk: from stream()
                await provider.stream(STREAM_BODY)
            fake.enqueue(StreamReply(stall_after=2))
            stream = await provider.stream(STREAM_BODY)
            received: list[dict[str, Any]] = []
            with pytest.raises(UpstreamTimeout):  # mid-stream: from the iterator
                await drain(stream, received)
            await stream.aclose()
            assert len(received) == 2
            await fake.wait_for_disconnects(3)

    run(test)


def test_malformed_answers_are_provider_errors() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(body=b"{not json"))
            with pytest.raises(ProviderError, match="malformed JSON"):
                await provider.complete(BODY)
            fake.enqueue(Reply(body=[1, 2]))
            with pytest.raises(ProviderError, match=r"not a chat\.completion"):
                await provider.complete(BODY)
            fake.enqueue(StreamReply(chunks=[b"data: {broken\n\n"]))
            with pytest.raises(ProviderError, match="malformed"):
                await provider.stream(STREAM_BODY)
            good = default_chunks(STREAM_BODY)[0]
            fake.enqueue(StreamReply(chunks=[good, b"data: {broken\n\n"]))
            stream = await provider.stream(STREAM_BODY)
            with pytest.raises(ProviderError, match="malformed"):
                await drain(stream, [])
            await stream.aclose()

    run(test)


def test_chunks_of_one_read_are_taken_without_an_await_up_to_a_malformed_one() -> None:
    """`next_ready`: what one read brought comes out in order with no read between, None
    once taking more would wait; a malformed chunk among them is a ProviderError that closes
    the response, after the good ones before it."""

    async def test() -> None:
        async with upstream() as (fake, provider):
            chunks = default_chunks(STREAM_BODY)
            raw = b"".join(b"data: " + msgspec.json.encode(c) + b"\n\n" for c in chunks)
            fake.enqueue(StreamReply(chunks=[raw]))
            stream = await provider.stream(STREAM_BODY)
            taken = [await stream.__aiter__().__anext__()]
            while (chunk := stream.next_ready()) is not None:  # type: ignore[attr-defined]
                taken.append(chunk)
            assert taken == chunks
            assert stream.usage is not None and stream.usage.completion_tokens > 0
            rest: list[dict[str, Any]] = []
            await drain(stream, rest)
            assert rest == []
            await stream.aclose()

            good = chunks[:2]
            raw = b"".join(b"data: " + msgspec.json.encode(c) + b"\n\n" for c in good)
            fake.enqueue(StreamReply(chunks=[raw + b"data: {broken\n\n" + raw]))
            stream = await provider.stream(STREAM_BODY)
            first = await stream.__aiter__().__anext__()
            assert [first, stream.next_ready()] == good  # type: ignore[attr-defined]
            with pytest.raises(ProviderError, match="malformed"):
                stream.next_ready()  # type: ignore[attr-defined]
            with pytest.raises(StopAsyncIteration):
                await stream.__aiter__().__anext__()  # closed: nothing after the failure
            await stream.aclose()

    run(test)


def test_error_event_and_non_stream_answers_to_a_stream_request() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            error = {"error": {"message": "overloaded", "type": "server_error"}}
            fake.enqueue(StreamReply(chunks=[error]))
            with pytest.raises(ProviderError, match="overloaded"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(Reply())
            with pytest.raises(ProviderError, match="instead of an event stream"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(StreamReply(chunks=[]))
            with pytest.raises(ProviderError, match="without a single chunk"):
                await provider.stream(STREAM_BODY)
            fake.enqueue(Disconnect())
            with pytest.raises(ProviderError):
                await provider.stream(STREAM_BODY)

    run(test)


def test_fake_runs_in_a_thread_for_sync_tests() -> None:
    fake = FakeOpenAI(text="threaded")
    base_url, stop = fake.start_in_thread()
    try:

        async def call() -> str:
            provider = create("openai", Options(base_url=base_url))
            try:
                result = await provider.complete(BODY)
            finally:
                await provider.close()
            content: str = result.body["choices"][0]["message"]["content"]
            return content

        assert asyncio.run(call()) == "threaded"
        assert fake.requests[0].json == BODY
    finally:
        stop()
