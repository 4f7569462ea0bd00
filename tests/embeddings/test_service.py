"""The embeddings service wired as the app wires it, on a real store and real adapters: `auto`
falls back from a failing OpenAI upstream (a real local fake answering 503) to the simulator,
one hold and one charge at the price of the model that answered; an upstream's refusal is not
retried and releases the hold; a breaker left open passes its model over; an upstream that
reports no count is charged the estimate, marked `estimated`. On SQLite and on a real Redis."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from gateway.admission.finisher import CallFinisher
from gateway.admission.gatekeeper import Gatekeeper
from gateway.auth import Caller
from gateway.config.loader import GatewayConfig, load_config
from gateway.embeddings.service import EmbeddingsAnswered, EmbeddingsService
from gateway.errors import InvalidRequest
from gateway.routing.resolver import Router
from gateway.schemas.embeddings import EmbeddingsRequest
from gateway.store.base import Store
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore
from providers.registry import spec_for
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.providers.adapter_checks import run
from tests.support.clock import Clock

GRANT = 10**9
CONFIG = """
[gateway]
hold_seconds = 60

[providers.up]
kind = "openai"
base_url = "{base_url}"
api_key = "sk-test"

[providers.sim]
kind = "simulator"

[[models]]
id = "up-embed"
provider = "up"
capability = "embeddings"
markup = 1000
pricing = {{ input_usd_per_mtok = 20 }}

[[models]]
id = "sim-embed"
provider = "sim"
capability = "embeddings"
markup = 1000
pricing = {{ input_usd_per_mtok = 10 }}

[routing.policies.embeddings]
candidates = [{{ model = "up-embed" }}, {{ model = "sim-embed" }}]
backoff_ms = 1

[routing.breaker]
failure_threshold = 1
open_seconds = 30

[tenants.default]
"""


@dataclass
class Parts:
    service: EmbeddingsService
    store: Store
    config: GatewayConfig
    router: Router

    def caller(self) -> Caller:
        return Caller(key_id="key_default", tenant=self.config.tenants["default"])

    async def embed(self, **body: Any) -> EmbeddingsAnswered:
        outcome = await self.service.handle(
            self.caller(), EmbeddingsRequest(**body), request_id="req_t", idempotency_key=None
        )
        assert isinstance(outcome, EmbeddingsAnswered)
        return outcome

    async def spent(self) -> int:
        wallet = await self.store.wallet("default")
        assert wallet.held_units == 0  # nothing left held, whatever happened
        return GRANT - wallet.balance_units


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None: a SQLite file; else the session's Redis under a prefix of this test's own."""
    if request.param == "sqlite":
        yield None
        return
    url: str = request.getfixturevalue("redis_url")
    prefix = f"test:{uuid.uuid4().hex}:"
    yield f"{url}#{prefix}"
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@asynccontextmanager
async def parts(tmp_path: Path, fake: FakeOpenAI, store_url: str | None) -> AsyncIterator[Parts]:
    path = tmp_path / "gateway.toml"
    path.write_text(CONFIG.format(base_url=fake.base_url))
    config = load_config(path)
    store: Store
    if store_url is None:
        store = SqliteStore(tmp_path / "gateway.db")
    else:
        url, prefix = store_url.split("#")
        store = RedisStore(url, prefix=prefix)
    await store.open()
    await store.grant("default", GRANT, entry_id="grant:default", reason="test")
    providers = {
        name: spec_for(entry.kind).create(name, entry.options)
        for name, entry in config.providers.items()
    }
    try:
        router = Router(config, providers, clock=Clock(), rng=random.Random(1))
        service = EmbeddingsService(CallFinisher(store), router, Gatekeeper(store), hold_seconds=60)
        yield Parts(service=service, store=store, config=config, router=router)
    finally:
        for provider in providers.values():
            await provider.close()
        await store.close()


def test_auto_falls_back_and_charges_the_model_that_answered(
    tmp_path: Path, store_url: str | None
) -> None:
    async def scenario() -> None:
        async with FakeOpenAI() as fake, parts(tmp_path, fake, store_url) as p:
            fake.enqueue(Reply.error(503, "overloaded"))
            first = await p.embed(model="auto", input=["x" * 40])
            # The failed upstream's breaker is open now: the next call goes straight on.
            second = await p.embed(model="auto", input=["x" * 40])
            spent = await p.spent()
        assert len(fake.requests) == 1
        assert first.model == second.model == "sim-embed"
        assert first.route == "auto; fallback=sim-embed; failed=up-embed:503"
        assert "up-embed" in second.route and "breaker_open" in second.route
        usage = json.loads(first.body)["usage"]
        assert usage["prompt_tokens"] == 10
        # 10 tokens at 10 USD per million tokens x 1000 credits per USD = 0.1 credits each call.
        assert usage["credits"] == "0.1000"
        assert spent == 2 * 1000

    run(scenario)


def test_an_upstream_refusal_is_not_retried_and_releases_the_hold(
    tmp_path: Path, store_url: str | None
) -> None:
    async def scenario() -> None:
        async with FakeOpenAI() as fake, parts(tmp_path, fake, store_url) as p:
            fake.enqueue(Reply.error(400, "This model's maximum context length is 8192 tokens"))
            with pytest.raises(InvalidRequest) as caught:
                await p.embed(model="auto", input=["hello"])
            spent = await p.spent()
        assert len(fake.requests) == 1
        assert "maximum context length" in caught.value.message
        assert caught.value.model == "up-embed"
        assert spent == 0

    run(scenario)


def test_an_upstream_without_usage_is_charged_the_estimate(
    tmp_path: Path, store_url: str | None
) -> None:
    async def scenario() -> None:
        async with FakeOpenAI() as fake, parts(tmp_path, fake, store_url) as p:
            body = {"object": "list", "data": [{"index": 0, "embedding": [0.6, 0.8]}]}
            fake.enqueue(Reply(body=body))
            answer = await p.embed(model="up-embed", input="y" * 41, dimensions=2)
            spent = await p.spent()
        sent = fake.requests[0].json
        assert sent == {"model": "up-embed", "input": ["y" * 41], "dimensions": 2}
        usage = json.loads(answer.body)["usage"]
        assert usage["prompt_tokens"] == 11 and usage["estimated"] is True
        assert spent == 11 * 20 * 10_000 * 1000 // 1_000_000
        assert answer.route == "pinned"

    run(scenario)
