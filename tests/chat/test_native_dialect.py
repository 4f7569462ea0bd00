"""The chat service with a request in a dialect some upstreams speak (Anthropic's Messages API):
routes whose provider speaks it get the client's body as is, others the translation; a request
that only such an upstream can carry keeps to those routes, or is refused naming the fields;
a fallback from one kind of route to the other answers in the client's dialect all the same."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gateway.chat.outcomes import ChatCompleted
from gateway.errors import InvalidRequest
from gateway.http.anthropic.dialect import ANTHROPIC_MESSAGES, MessagesCall
from gateway.http.anthropic.request import decode_messages, to_chat_request
from gateway.schemas.messages import MessagesRequest
from tests.chat.support import ChatParts, chat_parts
from tests.fakes.anthropic_upstream import FakeAnthropic, Reply, message, text

CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.sim]
kind = "simulator"

[providers.claude]
kind = "anthropic"
base_url = "{base_url}"
api_key = "sk-ant"

[[models]]
id = "sim"
provider = "sim"
capability = "chat"
max_output_tokens = 256
pricing = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 2 }}

[[models]]
id = "claude"
provider = "claude"
upstream_model = "claude-up"
capability = "chat"
max_output_tokens = 256
pricing = {{ input_usd_per_mtok = 3, output_usd_per_mtok = 15 }}

[routing.auto]
chat = {order}

[tenants.default]
"""
DOCUMENT = {
    "type": "document",
    "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
}


Scenario = Callable[[ChatParts, FakeAnthropic], Awaitable[None]]


def _run(tmp_path: Path, order: list[str], scenario: Scenario) -> None:
    """`scenario` on the chat service of CONFIG, `auto` trying `order`, and its fake Anthropic."""

    async def main() -> None:
        async with FakeAnthropic() as fake:
            config = CONFIG.format(
                base_url=fake.base_url, order=msgspec.json.encode(order).decode()
            )
            async with chat_parts(tmp_path, config_text=config) as parts:
                await scenario(parts, fake)

    asyncio.run(main())


async def _call(parts: ChatParts, body: dict[str, Any]) -> ChatCompleted:
    raw_body = msgspec.json.encode(body)
    request, raw = decode_messages(raw_body, MessagesRequest)
    chat, problems, dropped = to_chat_request(request, raw)
    outcome = await parts.service.handle(
        parts.caller(),
        chat,
        body_size=len(raw_body),
        dialect=ANTHROPIC_MESSAGES,
        request_id="req_test",
        idempotency_key=None,
        native=MessagesCall(raw, {"anthropic-version": "2023-06-01"}, problems, dropped=dropped),
    )
    assert isinstance(outcome, ChatCompleted)
    return outcome


def test_a_request_only_anthropic_can_carry_keeps_to_its_routes(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts, fake: FakeAnthropic) -> None:
        fake.enqueue(Reply(message=message(text("Read it."))))
        content = [{"type": "text", "text": "Read this"}, DOCUMENT]
        body = {
            "model": "auto",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": content}],
        }
        outcome = await _call(parts, body)
        answer = msgspec.json.decode(outcome.body)
        assert answer["content"] == [text("Read it.")] and answer["model"] == "claude"
        assert outcome.route == "auto; picked=claude"
        assert fake.requests[-1].json == {**body, "model": "claude-up"}

        with pytest.raises(InvalidRequest) as refused:
            await _call(parts, {**body, "model": "sim"})
        assert [d.field for d in refused.value.details] == ["messages[0].content[1].source.type"]
        assert len(fake.requests) == 1

    _run(tmp_path, ["sim", "claude"], scenario)


def test_the_translation_answers_when_the_native_route_fails(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts, fake: FakeAnthropic) -> None:
        fake.enqueue(Reply.error(529, "overloaded_error", "Overloaded"))
        body = {
            "model": "auto",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "Hello"}],
        }
        outcome = await _call(parts, body)
        answer = msgspec.json.decode(outcome.body)
        assert outcome.model == "sim" and outcome.route.startswith("auto; fallback=sim")
        assert answer["type"] == "message" and answer["content"][0]["type"] == "text"
        assert answer["usage"]["credits"] and answer["usage"]["output_tokens"] > 0

    _run(tmp_path, ["claude", "sim"], scenario)
