"""`ChatService` without HTTP: plain values in, an outcome (or an error carrying the model and
the rate state) out. The store is a real SqliteStore, the upstream the simulator adapter."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.chat.outcomes import ChatCompleted, ChatReplayed, ChatStreaming
from gateway.errors import InvalidRequest, ModelUnavailable, RateLimited
from gateway.http.ratelimit_headers import retry_after_seconds
from gateway.routing.resolver import ModelNotFound
from tests.chat.support import ChatParts, chat_parts

Scenario = Callable[[ChatParts], Awaitable[None]]


def _run(tmp_path: Path, scenario: Scenario, **kwargs: Any) -> None:
    async def main() -> None:
        async with chat_parts(tmp_path, **kwargs) as parts:
            await scenario(parts)

    asyncio.run(main())


def _body(text: str = "Say hello", **fields: Any) -> bytes:
    request = {"model": "sim-chat-1", "messages": [{"role": "user", "content": text}]}
    return json.dumps(request | fields).encode()


async def _charges(parts: ChatParts, tenant: str = "default") -> list[Any]:
    page = await parts.store.ledger(tenant, limit=100)
    return [e for e in page.entries if e.kind == "charge"]


def test_a_sync_call_is_completed_and_charged(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        outcome = await parts.handle(
            parts.caller(), _body(), request_id="req_1", idempotency_key=None
        )
        assert isinstance(outcome, ChatCompleted)
        assert outcome.model == "sim-chat-1"
        assert outcome.rate.limit_requests == 1000 and outcome.rate.limit_tokens == 10_000_000
        body = json.loads(outcome.body)
        assert body["object"] == "chat.completion" and body["model"] == "sim-chat-1"
        [charge] = await _charges(parts)
        assert charge.id == f"charge:{body['id']}" and charge.request_id == "req_1"
        assert body["usage"]["credits"] == f"{-charge.amount_units / 10_000:.4f}"
        assert (await parts.store.wallet("default")).held_units == 0

    _run(tmp_path, scenario)


def test_a_stream_yields_events_and_settles_before_done(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        outcome = await parts.handle(
            parts.caller(),
            _body(stream=True, stream_options={"include_usage": True}),
            request_id="req_2",
            idempotency_key=None,
        )
        assert isinstance(outcome, ChatStreaming)
        assert outcome.model == "sim-chat-1" and outcome.rate.limit_requests == 1000
        frames = []
        ended = []  # `ended` as each frame came: only the last one ends the body
        async for frame in outcome.events.events():
            if frame.endswith(b"data: [DONE]\n\n"):
                assert len(await _charges(parts)) == 1  # settled before the last frames
            frames.append(frame)
            ended.append(outcome.events.ended)
        await outcome.events.close()
        text = b"".join(frames).decode()
        assert text.endswith("data: [DONE]\n\n") and '"credits"' in text
        assert b'"usage"' in frames[-1]  # the usage chunk and [DONE] in the one last frame
        assert ended == [False] * (len(frames) - 1) + [True]
        assert not outcome.events.gone

    _run(tmp_path, scenario)


def test_a_finished_stream_is_freed_without_the_garbage_collector(tmp_path: Path) -> None:
    """Nothing of a stream's outlives it in a reference cycle, which only the collector frees
    (each one it must find costs CPU on every stream)."""

    async def scenario(parts: ChatParts) -> None:
        outcome = await parts.handle(
            parts.caller(), _body(stream=True), request_id="req_9", idempotency_key=None
        )
        assert isinstance(outcome, ChatStreaming)
        async for _ in outcome.events.events():
            pass
        await outcome.events.close()
        job = weakref.ref(outcome.events)
        del outcome
        assert job() is None

    gc.collect()
    gc.disable()
    try:
        _run(tmp_path, scenario)
    finally:
        gc.enable()


def test_a_client_that_leaves_stops_the_stream_and_pays_what_was_produced(
    tmp_path: Path,
) -> None:
    async def scenario(parts: ChatParts) -> None:
        outcome = await parts.handle(
            parts.caller(),
            _body("[[sim:tokens=200]] Tell a long story", model="sim-slow", stream=True),
            request_id="req_3",
            idempotency_key=None,
        )
        assert isinstance(outcome, ChatStreaming)
        events = outcome.events
        frames = []
        async for frame in events.events():
            frames.append(frame)
            if len(frames) == 1:
                await events.client_left()
        await events.close()
        assert events.gone and b"[DONE]" not in b"".join(frames)
        [charge] = await _charges(parts)
        assert charge.amount_units < 0
        assert (await parts.store.wallet("default")).held_units == 0

    _run(tmp_path, scenario)


def test_a_repeated_idempotency_key_is_replayed(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        first = await parts.handle(
            parts.caller(), _body(), request_id="req_4", idempotency_key="key-1"
        )
        again = await parts.handle(
            parts.caller(), _body(), request_id="req_5", idempotency_key="key-1"
        )
        assert isinstance(first, ChatCompleted) and isinstance(again, ChatReplayed)
        assert again.reply.body == first.body and again.reply.status == 200
        assert again.model == "sim-chat-1" and again.rate.limit_requests == 1000
        assert len(await _charges(parts)) == 1

    _run(tmp_path, scenario)


def test_an_upstream_failure_releases_and_carries_model_and_rate(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        with pytest.raises(ModelUnavailable) as caught:
            await parts.handle(
                parts.caller(), _body("[[sim:fail=503]]"), request_id="r", idempotency_key="k"
            )
        assert caught.value.model == "sim-chat-1"
        assert caught.value.rate is not None and caught.value.rate.limit_requests == 1000
        assert await _charges(parts) == []
        assert (await parts.store.wallet("default")).held_units == 0
        # The key was released with the call: a retry with it runs.
        outcome = await parts.handle(parts.caller(), _body(), request_id="r2", idempotency_key="k")
        assert isinstance(outcome, ChatCompleted)

    _run(tmp_path, scenario)


def test_a_refusal_carries_the_rate_state(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        caller = parts.caller("limited")
        outcome = await parts.handle(caller, _body(), request_id="a", idempotency_key=None)
        assert outcome.rate.remaining_requests == 0
        with pytest.raises(RateLimited) as caught:
            await parts.handle(caller, _body(), request_id="b", idempotency_key=None)
        rate = caught.value.rate
        assert rate is not None and rate.limit_requests == 1 and rate.retry_after_seconds > 0
        assert caught.value.model == "sim-chat-1"
        assert retry_after_seconds(rate) == 60  # what the edge sends as Retry-After

    _run(tmp_path, scenario)


def test_errors_before_resolution_carry_no_model(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        with pytest.raises(InvalidRequest) as invalid:
            await parts.handle(parts.caller(), b"{", request_id="a", idempotency_key=None)
        assert invalid.value.model is None and invalid.value.rate is None
        with pytest.raises(ModelNotFound):
            await parts.handle(
                parts.caller(), _body(model="nope"), request_id="b", idempotency_key=None
            )
        # Resolved, then refused by the plan: the model is known, no rate yet.
        with pytest.raises(InvalidRequest) as too_long:
            await parts.handle(
                parts.caller(), _body(max_tokens=100_000), request_id="c", idempotency_key=None
            )
        assert too_long.value.model == "sim-chat-1" and too_long.value.rate is None

    _run(tmp_path, scenario)
