"""The Anthropic adapter against a real local fake Messages API: every way a call fails (error
events, broken streams, error statuses, malformed answers, refused connections, timeouts)."""

from __future__ import annotations

from typing import Any

import pytest

from providers.anthropic import Options, create
from providers.base import ChatProvider, Usage
from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.http1 import BrokenBody
from tests.fakes.anthropic_upstream import (
    DEFAULT_TEXT,
    Disconnect,
    Reply,
    StreamReply,
    error_event,
    events_for,
    message,
)
from tests.providers.adapter_checks import assert_refused_is_unavailable
from tests.providers.anthropic_support import (
    BODY,
    STREAM_BODY,
    collect,
    drain,
    reassemble,
    run,
    upstream,
)


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
            # never reached message_delta: message_start's counts, as reported (the gateway
            # adds what it delivered since: gateway.chat.usage)
            assert stream.usage == Usage(
                prompt_tokens=12, completion_tokens=1, total_tokens=13, partial=True
            )
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
            assert isinstance(caught.value.__cause__, BrokenBody)
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
    def make(base_url: str) -> ChatProvider:
        return create("claude", Options(base_url=base_url))

    run(lambda: assert_refused_is_unavailable(make, BODY))


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
