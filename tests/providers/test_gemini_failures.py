"""The Gemini adapter against a real local fake upstream: every way a call fails (error
statuses, blocked prompts, malformed answers, broken streams, timeouts, refused connections)."""

from __future__ import annotations

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
from providers.gemini import Options, create
from providers.http1 import BrokenBody
from providers.status import message_from_body
from tests.fakes.gemini_upstream import (
    Disconnect,
    Reply,
    StreamReply,
    error_body,
    events_for,
    response,
    usage,
)
from tests.providers.adapter_checks import assert_refused_is_unavailable
from tests.providers.gemini_support import BODY, STREAM_BODY, drain, run, upstream

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
            assert isinstance(caught.value.__cause__, BrokenBody)
            assert (
                "".join(c["choices"][0]["delta"]["content"] for c in received) == "Hello from the"
            )
            # what the events said so far: the prompt count, no candidates count yet
            assert stream.usage == Usage(prompt_tokens=12, total_tokens=12, partial=True)
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
    def make(base_url: str) -> ChatProvider:
        return create("gem", Options(base_url=base_url))

    run(lambda: assert_refused_is_unavailable(make, BODY, "/v1beta"))
