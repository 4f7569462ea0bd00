"""Fallback in the chat service, on scripted upstreams: the order, one hold and one charge at
the price of the model that answered, what is not retried, breakers, pinned models, retries
that honour Retry-After, and `model_options` going to its own model's upstream only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.billing.pricing import ChatPrice
from gateway.chat.outcomes import ChatCompleted, ChatReplayed, ChatStreaming
from gateway.errors import (
    InvalidRequest,
    ModelUnavailable,
    UpstreamFailed,
    UpstreamTimedOut,
)
from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from tests.chat.support import Break, ChatParts, ScriptedChat, chat_parts

CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.pa]
kind = "simulator"

[providers.pb]
kind = "simulator"

[providers.pc]
kind = "simulator"

[[models]]
id = "a"
provider = "pa"
capability = "chat"
max_output_tokens = 100
options_namespace = "alpha"
pricing = { input_usd_per_mtok = 1, output_usd_per_mtok = 2 }

[[models]]
id = "b"
provider = "pb"
capability = "chat"
max_output_tokens = 100
options_namespace = "beta"
pricing = { input_usd_per_mtok = 4, output_usd_per_mtok = 20 }

[[models]]
id = "c"
provider = "pc"
capability = "chat"
max_output_tokens = 100
pricing = { input_usd_per_mtok = 2, output_usd_per_mtok = 4 }

[routing.policies.chat]
candidates = [{ model = "a" }, { model = "b" }, { model = "c" }]
backoff_ms = 1
max_retry_after_ms = 200

[routing.breaker]
failure_threshold = 2
open_seconds = 10

[tenants.default]
"""
PROVIDERS = ("pa", "pb", "pc")
Scenario = Callable[[ChatParts], Awaitable[None]]


def _run(tmp_path: Path, scenario: Scenario, config: str = CONFIG) -> None:
    async def main() -> None:
        async with chat_parts(tmp_path, config_text=config, scripted=PROVIDERS) as parts:
            await scenario(parts)

    asyncio.run(main())


def _body(model: str = "auto", **fields: Any) -> bytes:
    request = {"model": model, "messages": [{"role": "user", "content": "Say hello"}]}
    return json.dumps(request | fields).encode()


def _up(parts: ChatParts, provider: str) -> ScriptedChat:
    upstream: ScriptedChat = parts.providers[provider]
    return upstream


async def _call(parts: ChatParts, body: bytes, key: str | None = None) -> Any:
    return await parts.handle(parts.caller(), body, request_id="req", idempotency_key=key)


async def _charges(parts: ChatParts) -> list[Any]:
    page = await parts.store.ledger("default", limit=100)
    return [e for e in page.entries if e.kind == "charge"]


async def _held(parts: ChatParts) -> int:
    return (await parts.store.wallet("default")).held_units


def _unavailable() -> UpstreamUnavailable:
    return UpstreamUnavailable("overloaded", upstream_status=503)


def test_a_failed_candidate_falls_back_with_one_hold_and_one_charge_at_the_answer_s_price(
    tmp_path: Path,
) -> None:
    async def scenario(parts: ChatParts) -> None:
        _up(parts, "pa").then(_unavailable())
        body = _body()
        outcome = await _call(parts, body)
        assert isinstance(outcome, ChatCompleted)
        assert outcome.model == "b"
        assert outcome.route == "auto; fallback=b; failed=a:503"
        answer = json.loads(outcome.body)
        assert answer["model"] == "b"
        assert [len(_up(parts, p).bodies) for p in PROVIDERS] == [1, 1, 0]
        # One admission, sized for the dearest candidate (b) at the largest output limit.
        b = ChatPrice.of(parts.config.models["b"])
        assert parts.gatekeeper.holds == [b.hold_units(len(body), 100)]
        [charge] = await _charges(parts)
        assert -charge.amount_units == b.charge_units(10, 5)
        assert answer["usage"]["credits"] == f"{b.charge_units(10, 5) / 10_000:.4f}"
        assert await _held(parts) == 0

    _run(tmp_path, scenario)


def test_a_first_answer_says_which_model_auto_picked(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        outcome = await _call(parts, _body())
        assert (outcome.model, outcome.route) == ("a", "auto; picked=a")
        pinned = await _call(parts, _body("c"))
        assert (pinned.model, pinned.route) == ("c", "pinned")

    _run(tmp_path, scenario)


def test_every_kind_of_upstream_failure_falls_back_and_the_last_one_is_the_answer(
    tmp_path: Path,
) -> None:
    async def scenario(parts: ChatParts) -> None:
        _up(parts, "pa").then(UpstreamTimeout("no answer"))
        _up(parts, "pb").then(ProviderError("closed the connection before answering"))
        _up(parts, "pc").then(ProviderError("bad gateway", upstream_status=502))
        with pytest.raises(UpstreamFailed) as caught:
            await _call(parts, _body())
        error = caught.value
        assert error.model == "c" and error.rate is not None
        assert error.route == "auto; failed=a:timeout,b:error,c:502"
        assert await _charges(parts) == [] and await _held(parts) == 0
        assert len(parts.gatekeeper.holds) == 1

    _run(tmp_path, scenario)


def test_a_rejected_request_is_not_retried(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        _up(parts, "pa").then(_unavailable())
        _up(parts, "pb").then(UpstreamRejectedRequest("bad field", upstream_status=400))
        with pytest.raises(InvalidRequest) as caught:
            await _call(parts, _body())
        assert caught.value.model == "b"
        assert caught.value.route == "auto; fallback=b; failed=a:503"
        assert len(_up(parts, "pc").bodies) == 0
        assert await _charges(parts) == [] and await _held(parts) == 0
        # A 500 is the upstream's answer too: not retried.
        _up(parts, "pa").then(ProviderError("server error", upstream_status=500))
        with pytest.raises(UpstreamFailed):
            await _call(parts, _body())
        assert len(_up(parts, "pb").bodies) == 1

    _run(tmp_path, scenario)


def test_an_open_breaker_is_passed_over_then_probed_after_open_seconds(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        a = _up(parts, "pa").then(_unavailable(), _unavailable())
        for _ in range(2):  # the threshold is 2
            assert (await _call(parts, _body())).model == "b"
        assert parts.router.breaker_states()["pa"] == "open"
        outcome = await _call(parts, _body())
        assert outcome.model == "b"
        assert outcome.route == "auto; fallback=b; failed=a:breaker_open"
        assert len(a.bodies) == 2  # not called while open
        parts.clock.advance(10)
        assert parts.router.breaker_states()["pa"] == "half_open"
        outcome = await _call(parts, _body())  # the probe, and it answers
        assert (outcome.model, outcome.route) == ("a", "auto; picked=a")
        assert parts.router.breaker_states()["pa"] == "closed"
        assert len(await _charges(parts)) == 4

    _run(tmp_path, scenario)


def test_a_pinned_model_whose_breaker_is_open_is_503_without_a_call_or_a_hold(
    tmp_path: Path,
) -> None:
    async def scenario(parts: ChatParts) -> None:
        a = _up(parts, "pa").then(_unavailable(), _unavailable())
        for _ in range(2):
            with pytest.raises(ModelUnavailable) as caught:
                await _call(parts, _body("a"))
            assert caught.value.route == "pinned; failed=a:503"
        holds = len(parts.gatekeeper.holds)
        with pytest.raises(ModelUnavailable) as caught:
            await _call(parts, _body("a"))
        error = caught.value
        assert error.model == "a" and error.route == "pinned; failed=a:breaker_open"
        assert "'auto'" in error.message and error.headers["Retry-After"] == "10"
        assert len(a.bodies) == 2 and len(parts.gatekeeper.holds) == holds
        assert await _held(parts) == 0
        # `auto` still answers, from the next candidate.
        assert (await _call(parts, _body())).model == "b"
        # With an Idempotency-Key the call is admitted (there may be a reply to replay), and
        # released when the breaker refuses it.
        with pytest.raises(ModelUnavailable) as caught:
            await _call(parts, _body("a"), key="k-new")
        assert caught.value.route == "pinned; failed=a:breaker_open"
        assert len(a.bodies) == 2 and await _held(parts) == 0


def test_a_reply_is_replayed_whatever_the_breaker_says(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        first = await _call(parts, _body("a"), key="k1")
        _up(parts, "pa").then(_unavailable(), _unavailable())
        for _ in range(2):
            with pytest.raises(ModelUnavailable):
                await _call(parts, _body("a"))
        assert parts.router.breaker_states()["pa"] == "open"
        again = await _call(parts, _body("a"), key="k1")
        assert isinstance(again, ChatReplayed) and again.reply.body == first.body
        assert (again.model, again.route) == ("a", "pinned")

    _run(tmp_path, scenario)


def test_retries_of_one_upstream_wait_for_its_retry_after_up_to_the_cap(tmp_path: Path) -> None:
    config = CONFIG.replace("backoff_ms = 1", "backoff_ms = 1\nmax_attempts = 2")

    async def scenario(parts: ChatParts) -> None:
        loop = asyncio.get_running_loop()
        slow = UpstreamUnavailable("slow down", upstream_status=429, retry_after=0.05)
        a = _up(parts, "pa").then(slow)
        started = loop.time()
        outcome = await _call(parts, _body("a"))
        assert loop.time() - started >= 0.05
        assert (outcome.model, outcome.route) == ("a", "pinned; retried=a:429")
        assert len(a.bodies) == 2
        # Beyond max_retry_after_ms (200): not called again, at once.
        a.then(UpstreamUnavailable("slow down", upstream_status=429, retry_after=30))
        started = loop.time()
        with pytest.raises(ModelUnavailable) as caught:
            await _call(parts, _body("a"))
        assert loop.time() - started < 1
        assert caught.value.route == "pinned; failed=a:429,a:retry_after"
        assert len(a.bodies) == 3
        # max_attempts bounds auto too: two calls, then the answer is the last failure.
        for provider in PROVIDERS:
            _up(parts, provider).then(_unavailable())
        with pytest.raises(ModelUnavailable):
            await _call(parts, _body())
        assert len(_up(parts, "pc").bodies) == 0

    _run(tmp_path, scenario, config)


def test_a_stream_falls_back_when_its_upstream_fails_before_the_first_chunk(
    tmp_path: Path,
) -> None:
    async def scenario(parts: ChatParts) -> None:
        _up(parts, "pa").then(_unavailable())  # from stream() itself
        _up(parts, "pb").then(Break(UpstreamTimeout("no first chunk"), after=0))
        outcome = await _call(parts, _body(stream=True))
        assert isinstance(outcome, ChatStreaming)
        assert outcome.model == "c"
        assert outcome.route == "auto; fallback=c; failed=a:503,b:timeout"
        text = b"".join([frame async for frame in outcome.events.events()]).decode()
        await outcome.events.close()
        assert text.endswith("data: [DONE]\n\n") and '"model":"c"' in text
        assert len(await _charges(parts)) == 1 and await _held(parts) == 0

    _run(tmp_path, scenario)


def test_a_stream_broken_after_its_first_chunk_ends_with_an_error_and_is_charged_once(
    tmp_path: Path,
) -> None:
    async def scenario(parts: ChatParts) -> None:
        _up(parts, "pa").then(Break(UpstreamTimeout("stalled"), after=2))
        outcome = await _call(parts, _body(stream=True))
        assert isinstance(outcome, ChatStreaming) and outcome.route == "auto; picked=a"
        text = b"".join([frame async for frame in outcome.events.events()]).decode()
        await outcome.events.close()
        assert "[DONE]" not in text and '"error"' in text
        assert len(_up(parts, "pb").bodies) == 0  # too late to fall back
        assert len(await _charges(parts)) == 1 and await _held(parts) == 0

    _run(tmp_path, scenario)


def test_model_options_go_to_their_own_model_s_upstream_only(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        _up(parts, "pa").then(_unavailable())
        options = {"alpha": {"top_k": 3}, "beta": {"safety": "low"}}
        outcome = await _call(parts, _body(model_options=options, max_tokens=20))
        assert outcome.model == "b"
        [sent_a] = _up(parts, "pa").bodies
        [sent_b] = _up(parts, "pb").bodies
        assert sent_a["top_k"] == 3 and "safety" not in sent_a and sent_a["model"] == "a"
        assert sent_b["safety"] == "low" and "top_k" not in sent_b and sent_b["model"] == "b"
        assert "model_options" not in sent_a and "model_options" not in sent_b
        assert sent_a["max_completion_tokens"] == sent_b["max_completion_tokens"] == 20

    _run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("model", "options", "field"),
    [
        ("auto", {"gamma": {}}, "model_options.gamma"),
        ("a", {"beta": {"x": 1}}, "model_options.beta"),
        ("c", {"alpha": {}}, "model_options.alpha"),
        ("a", {"alpha": 5}, "model_options.alpha"),
        ("a", {"alpha": {"temperature": 2}}, "model_options.alpha.temperature"),
    ],
)
def test_model_options_that_cannot_be_used_are_refused_with_the_field(
    tmp_path: Path, model: str, options: dict[str, Any], field: str
) -> None:
    async def scenario(parts: ChatParts) -> None:
        with pytest.raises(InvalidRequest) as caught:
            await _call(parts, _body(model, model_options=options))
        assert [d.field for d in caught.value.details] == [field]
        assert parts.gatekeeper.holds == []

    _run(tmp_path, scenario)


def test_a_replay_keeps_the_model_and_route_of_the_first_answer(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        _up(parts, "pa").then(_unavailable())
        first = await _call(parts, _body(), key="k1")
        again = await _call(parts, _body(), key="k1")
        assert isinstance(first, ChatCompleted) and isinstance(again, ChatReplayed)
        assert again.model == "b" and again.route == first.route
        assert again.reply.headers["x-gateway-route"] == "auto; fallback=b; failed=a:503"
        assert len(await _charges(parts)) == 1

    _run(tmp_path, scenario)


def test_a_timeout_everywhere_is_a_504(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        for provider in PROVIDERS:
            _up(parts, provider).then(UpstreamTimeout("no answer"))
        with pytest.raises(UpstreamTimedOut) as caught:
            await _call(parts, _body())
        assert caught.value.route == "auto; failed=a:timeout,b:timeout,c:timeout"

    _run(tmp_path, scenario)


def test_the_error_names_the_model_that_failed_last_not_one_passed_over(tmp_path: Path) -> None:
    async def scenario(parts: ChatParts) -> None:
        _up(parts, "pb").then(_unavailable(), _unavailable())
        _up(parts, "pc").then(_unavailable(), _unavailable())
        for _ in range(2):  # opens b's and c's breakers
            with pytest.raises(ModelUnavailable):
                await _call(parts, _body("b"))
            with pytest.raises(ModelUnavailable):
                await _call(parts, _body("c"))
        _up(parts, "pa").then(ProviderError("bad gateway", upstream_status=502))
        with pytest.raises(UpstreamFailed) as caught:
            await _call(parts, _body())
        assert caught.value.model == "a"
        assert caught.value.route == "auto; failed=a:502,b:breaker_open,c:breaker_open"

    _run(tmp_path, scenario)
