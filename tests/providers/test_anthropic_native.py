"""The Anthropic adapter's Messages API as is (`providers.base.MessagesProvider`): the body and
the client's headers go through unchanged, answers and events come back as sent with their
counts, an overload right after `message_start` fails the call before anything is handed out,
and a stream cut short reports what it had produced."""

from __future__ import annotations

from typing import Any

import pytest

from providers.anthropic import Options, create
from providers.anthropic.native import NativeEventStream
from providers.base import MessagesProvider
from providers.errors import ProviderError, UpstreamRejectedRequest, UpstreamUnavailable
from tests.fakes.anthropic_upstream import (
    FakeAnthropic,
    Reply,
    StreamReply,
    error_event,
    events_for,
    message,
    text,
    thinking,
)
from tests.providers.adapter_checks import run

BODY: dict[str, Any] = {
    "model": "claude-up",
    "max_tokens": 100,
    "system": [{"type": "text", "text": "Brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
}
HEADERS = {"anthropic-version": "2026-10-21", "anthropic-beta": "a-beta"}


def test_a_message_goes_and_comes_back_as_is() -> None:
    async def main() -> None:
        async with FakeAnthropic() as fake:
            provider = create("claude", Options(base_url=fake.base_url, api_key="sk-ant"))
            try:
                assert isinstance(provider, MessagesProvider)
                answer = message(
                    thinking("Hm."), text("Hi."), input_tokens=7, output_tokens=3, cache_read=40
                )
                fake.enqueue(Reply(message=answer))
                got = await provider.messages(dict(BODY), HEADERS)
                assert got.body == answer
                assert (got.usage.prompt_tokens, got.usage.cached_tokens) == (47, 40)
                sent = fake.requests[-1]
                assert sent.json == BODY
                assert sent.headers["anthropic-version"] == "2026-10-21"
                assert sent.headers["anthropic-beta"] == "a-beta"
                assert sent.headers["x-api-key"] == "sk-ant"
                fake.enqueue(Reply.error(400, "invalid_request_error", "messages.0: bad"))
                with pytest.raises(UpstreamRejectedRequest, match=r"messages\.0: bad"):
                    await provider.messages(dict(BODY), HEADERS)
                counted = await provider.count_tokens(dict(BODY), HEADERS)
                assert counted == {"input_tokens": fake.count_tokens}
                assert fake.requests[-1].path == "/v1/messages/count_tokens"
            finally:
                await provider.close()

    run(main)


def test_a_stream_yields_the_events_as_sent() -> None:
    async def main() -> None:
        async with FakeAnthropic() as fake:
            provider = create("claude", Options(base_url=fake.base_url))
            try:
                whole = message(text("One two three."), input_tokens=9, output_tokens=4)
                fake.enqueue(StreamReply(message=whole))
                stream = await provider.messages_stream(dict(BODY), HEADERS)
                events = [event async for event in stream]
                await stream.aclose()
                assert events == events_for(whole)
                assert fake.requests[-1].json == {**BODY, "stream": True}
                usage = stream.usage
                assert usage is not None and not usage.partial
                assert (usage.prompt_tokens, usage.completion_tokens) == (9, 4)
            finally:
                await provider.close()

    run(main)


def test_an_overload_after_message_start_fails_the_call() -> None:
    async def main() -> None:
        async with FakeAnthropic() as fake:
            provider = create("claude", Options(base_url=fake.base_url))
            try:
                start = {"type": "message_start", "message": message()}
                overloaded = error_event("overloaded_error", "Overloaded")
                fake.enqueue(StreamReply(events=[start, {"type": "ping"}, overloaded]))
                with pytest.raises(UpstreamUnavailable):
                    await provider.messages_stream(dict(BODY), HEADERS)
            finally:
                await provider.close()

    run(main)


def test_a_stream_cut_short_reports_what_it_produced() -> None:
    async def main() -> None:
        async with FakeAnthropic() as fake:
            provider = create("claude", Options(base_url=fake.base_url))
            try:
                whole = message(text("a b c d e f g h"), input_tokens=20, output_tokens=8)
                events = events_for(whole)
                cut = len(events) - 3  # before the last deltas, message_delta and message_stop
                fake.enqueue(StreamReply(message=whole, break_after=cut))
                stream = await provider.messages_stream(dict(BODY), HEADERS)
                assert isinstance(stream, NativeEventStream)
                seen: list[dict[str, Any]] = []
                with pytest.raises(ProviderError):
                    async for event in stream:
                        seen.append(event)
                await stream.aclose()
                assert seen == events[: len(seen)] and seen
                usage = stream.usage
                assert usage is not None and usage.partial
                assert usage.prompt_tokens == 20 and usage.completion_tokens >= 1
            finally:
                await provider.close()

    run(main)
