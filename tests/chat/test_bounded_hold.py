"""A large output limit on a wallet that cannot hold all of it: the call is held what the
wallet has (at least the prompt and the first `MIN_HELD_OUTPUT_TOKENS`), the upstream is asked
for the output tokens that pays for (the chat body's `max_completion_tokens`, a native Messages
body's `max_tokens`, a fallback's body too), the answer ends as a length stop and says the
limit it was given; the charge stays within the hold. A wallet below the minimum is a 402
naming the limit as the client's dialect does. On Messages, a limit above the model's own is
lowered to it; on chat it stays a 400."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gateway.billing.pricing import ChatPrice, estimate_prompt_tokens, prompt_token_bound
from gateway.chat.outcomes import MAX_TOKENS_HEADER, ChatCompleted, ChatReplayed, ChatStreaming
from gateway.chat.plan import MIN_HELD_OUTPUT_TOKENS
from gateway.errors import InsufficientCredits, InvalidRequest
from gateway.http.anthropic.dialect import ANTHROPIC_MESSAGES, MessagesCall
from gateway.http.anthropic.request import decode_messages, to_chat_request
from gateway.schemas.messages import MessagesRequest
from providers.errors import UpstreamUnavailable
from tests.chat.support import ChatParts, ScriptedChat, chat_parts
from tests.fakes.anthropic_upstream import FakeAnthropic, Reply, message, text

CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 100000
tokens_per_minute = 10000000

[providers.sim]
kind = "simulator"

[providers.pa]
kind = "simulator"

[providers.pb]
kind = "simulator"

[providers.claude]
kind = "anthropic"
base_url = "{base_url}"
api_key = "sk-ant"

[[models]]
id = "opus-sim"
provider = "sim"
capability = "chat"
markup = 1000
max_output_tokens = 64000
pricing = {{ input_usd_per_mtok = 15, output_usd_per_mtok = 75 }}

[[models]]
id = "small-sim"
provider = "sim"
capability = "chat"
markup = 1000
max_output_tokens = 4096
pricing = {{ input_usd_per_mtok = 15, output_usd_per_mtok = 75 }}

[[models]]
id = "a"
provider = "pa"
capability = "chat"
markup = 1000
max_output_tokens = 64000
pricing = {{ input_usd_per_mtok = 15, output_usd_per_mtok = 75 }}

[[models]]
id = "b"
provider = "pb"
capability = "chat"
markup = 1000
max_output_tokens = 64000
pricing = {{ input_usd_per_mtok = 15, output_usd_per_mtok = 75 }}

[[models]]
id = "claude"
provider = "claude"
upstream_model = "claude-up"
capability = "chat"
markup = 1000
max_output_tokens = 64000
pricing = {{ input_usd_per_mtok = 15, output_usd_per_mtok = 75 }}

[routing.policies.chat]
candidates = [{{ model = "a" }}, {{ model = "b" }}]
backoff_ms = 1

[tenants.default]
"""
WALLET = 300_000
"""30 credits: 0.015 credit a prompt byte and 0.075 an output token hold the prompt and a few
hundred output tokens, far from Claude Code's 32,000 (2,400 credits)."""
LONG = "[[sim:tokens=3000]] Tell me a long story"

Scenario = Callable[[ChatParts, FakeAnthropic], Awaitable[None]]


def _run(tmp_path: Path, scenario: Scenario, *, grant: int = WALLET) -> None:
    async def main() -> None:
        async with FakeAnthropic() as fake:
            config = CONFIG.format(base_url=fake.base_url)
            async with chat_parts(
                tmp_path, grant=grant, config_text=config, scripted=("pa", "pb")
            ) as parts:
                await scenario(parts, fake)

    asyncio.run(main())


def _price(parts: ChatParts) -> ChatPrice:
    return ChatPrice.of(parts.config.models["opus-sim"])


def _paid_tokens(parts: ChatParts, body_size: int, available: int) -> int:
    """The most output tokens whose hold, with the body's prompt bound, `available` covers."""
    price, prompt = _price(parts), prompt_token_bound(body_size)
    tokens = 0
    while price.hold_units(prompt, tokens + 1) <= available:
        tokens += 1
    return tokens


def _chat_body(model: str, **fields: Any) -> bytes:
    request = {"model": model, "messages": [{"role": "user", "content": LONG}]}
    return json.dumps(request | fields).encode()


async def _wallet(parts: ChatParts) -> tuple[int, int]:
    wallet = await parts.store.wallet("default")
    return wallet.balance_units, wallet.held_units


async def _messages(
    parts: ChatParts, body: dict[str, Any], *, key: str | None = None
) -> tuple[Any, int]:
    raw_body = msgspec.json.encode(body)
    request, raw = decode_messages(raw_body, MessagesRequest)
    chat, problems, dropped = to_chat_request(request, raw)
    outcome = await parts.service.handle(
        parts.caller(),
        chat,
        body_size=len(raw_body),
        dialect=ANTHROPIC_MESSAGES,
        request_id="req_test",
        idempotency_key=key,
        native=MessagesCall(raw, {"anthropic-version": "2023-06-01"}, problems, dropped),
    )
    return outcome, len(raw_body)


def test_a_chat_call_the_wallet_cannot_hold_whole_is_asked_for_what_it_pays(
    tmp_path: Path,
) -> None:
    async def scenario(parts: ChatParts, fake: FakeAnthropic) -> None:
        body = _chat_body("opus-sim", max_completion_tokens=32_000)
        paid = _paid_tokens(parts, len(body), WALLET)
        assert MIN_HELD_OUTPUT_TOKENS <= paid < 1_000

        outcome = await parts.handle(parts.caller(), body, request_id="r1", idempotency_key="k")
        assert isinstance(outcome, ChatCompleted)
        answer = msgspec.json.decode(outcome.body)
        assert answer["choices"][0]["finish_reason"] == "length"
        assert answer["usage"]["completion_tokens"] == paid  # cut where the hold ends
        assert outcome.max_tokens == paid
        # the tokens reserved follow the lowered limit (in proportion to the hold: +-1)
        reserved = 10_000_000 - outcome.rate.remaining_tokens
        assert abs(reserved - (estimate_prompt_tokens(len(body)) + paid)) <= 1

        balance, held = await _wallet(parts)
        assert held == 0 and 0 <= balance < WALLET
        assert parts.gatekeeper.holds == [_price(parts).hold_units(len(body), 32_000)]

        replay = await parts.handle(parts.caller(), body, request_id="r2", idempotency_key="k")
        assert isinstance(replay, ChatReplayed)
        assert replay.reply.headers[MAX_TOKENS_HEADER] == str(paid)

    _run(tmp_path, scenario)


def test_a_stream_the_wallet_cannot_hold_whole_ends_as_a_length_stop(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts, fake: FakeAnthropic) -> None:
        body = _chat_body("opus-sim", max_tokens=32_000, stream=True)
        paid = _paid_tokens(parts, len(body), WALLET)
        outcome = await parts.handle(parts.caller(), body, request_id="r1", idempotency_key=None)
        assert isinstance(outcome, ChatStreaming)
        assert outcome.max_tokens == paid
        frames = b"".join([frame async for frame in outcome.events.events()])
        await outcome.events.close()
        assert b'"finish_reason":"length"' in frames
        balance, held = await _wallet(parts)
        assert held == 0 and 0 <= balance < WALLET

    _run(tmp_path, scenario)


def test_a_fallback_is_asked_for_what_the_hold_pays_too(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts, fake: FakeAnthropic) -> None:
        first: ScriptedChat = parts.providers["pa"]
        second: ScriptedChat = parts.providers["pb"]
        first.then(UpstreamUnavailable("overloaded", upstream_status=503))
        body = _chat_body("auto", max_completion_tokens=32_000)
        paid = _paid_tokens(parts, len(body), WALLET)

        outcome = await parts.handle(parts.caller(), body, request_id="r1", idempotency_key=None)
        assert isinstance(outcome, ChatCompleted) and outcome.model == "b"
        assert first.bodies[0]["max_completion_tokens"] == paid
        assert second.bodies[0]["max_completion_tokens"] == paid
        assert outcome.max_tokens == paid

    _run(tmp_path, scenario)


def test_a_native_messages_body_gets_its_max_tokens_lowered(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts, fake: FakeAnthropic) -> None:
        fake.enqueue(Reply(message=message(text("Once upon a time"), stop_reason="max_tokens")))
        body = {
            "model": "claude",
            "max_tokens": 32_000,
            "messages": [{"role": "user", "content": "Tell me a long story"}],
        }
        outcome, size = await _messages(parts, body)
        paid = _paid_tokens(parts, size, WALLET)
        assert isinstance(outcome, ChatCompleted)
        assert fake.requests[-1].json == {**body, "model": "claude-up", "max_tokens": paid}
        assert outcome.max_tokens == paid

    _run(tmp_path, scenario)


def test_a_wallet_that_cannot_pay_the_first_tokens_is_refused_naming_the_dialect_s_field(
    tmp_path: Path,
) -> None:
    async def scenario(parts: ChatParts, fake: FakeAnthropic) -> None:
        body = {
            "model": "opus-sim",
            "max_tokens": 32_000,
            "messages": [{"role": "user", "content": "Hello"}],
        }
        with pytest.raises(InsufficientCredits) as poor:
            await _messages(parts, body)
        fields = [d.field for d in poor.value.details]
        assert fields == ["hold_credits", "available_credits", "max_tokens"]
        assert "max_completion_tokens" not in poor.value.message

        chat = _chat_body("opus-sim", max_completion_tokens=32_000)
        with pytest.raises(InsufficientCredits) as on_chat:
            await parts.handle(parts.caller(), chat, request_id="r", idempotency_key=None)
        assert on_chat.value.details[-1].field == "max_completion_tokens"
        # the hold asked at least: the prompt and the first tokens, not the whole 32,000
        minimum = _price(parts).hold_units(len(chat), MIN_HELD_OUTPUT_TOKENS)
        needed = on_chat.value.details[0].message
        assert abs(float(needed) * 10_000 - minimum) <= 1
        assert await _wallet(parts) == (10_000, 0)

    _run(tmp_path, scenario, grant=10_000)  # 1 credit


def test_messages_lower_a_limit_above_the_model_s_and_chat_refuses_it(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts, fake: FakeAnthropic) -> None:
        body = {
            "model": "small-sim",
            "max_tokens": 32_000,
            "messages": [{"role": "user", "content": "[[sim:tokens=5000]] Go on"}],
        }
        outcome, _ = await _messages(parts, body)
        assert isinstance(outcome, ChatCompleted)
        answer = msgspec.json.decode(outcome.body)
        assert answer["stop_reason"] == "max_tokens"
        assert answer["usage"]["output_tokens"] == 4096
        assert outcome.max_tokens == 4096

        chat = _chat_body("small-sim", max_tokens=32_000)
        with pytest.raises(InvalidRequest) as refused:
            await parts.handle(parts.caller(), chat, request_id="r", idempotency_key=None)
        assert [d.field for d in refused.value.details] == ["max_tokens"]

    _run(tmp_path, scenario, grant=10**9)
