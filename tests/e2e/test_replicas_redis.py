"""Two gateway processes sharing one real Redis (or a real Redis Cluster) behave as one gateway.

The upstream is the fake OpenAI server over real HTTP, so upstream calls can be counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import redis

from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.redis_cluster import LocalCluster, redis_cluster

__all__ = ["redis_cluster"]  # the fixture, for the cluster runs

CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 100000
tokens_per_minute = 0

[providers.up]
kind = "openai"
base_url = "{base_url}"
api_key = "sk-upstream"

[[models]]
id = "up-chat"
provider = "up"
upstream_model = "fake-model"
capability = "chat"
markup = 1000
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[tenants.rich]
[tenants.small]
[tenants.limited]
requests_per_minute = 10
"""
# The fake reports 12 prompt + 6 completion tokens: (12*5 + 6*15) / 1e6 USD * 1000 credits/USD.
CHARGE = Decimal("0.1500")
BODY = {"model": "up-chat", "messages": [{"role": "user", "content": "Hello there"}]}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(params=["redis", "cluster"])
def store_url(request: pytest.FixtureRequest) -> str:
    """One Redis (a database of its own), or a Redis Cluster (3 masters, 3 replicas); empty."""
    if request.param == "cluster":
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        cluster.flushall()
        return cluster.url
    shared = str(request.getfixturevalue("redis_url")).rsplit("/", 1)[0] + "/7"
    redis.Redis.from_url(shared).flushdb()
    return shared


@pytest.fixture
def replicas(
    upstream: FakeOpenAI, store_url: str, tmp_path: Path
) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    shared = store_url
    upstream.requests.clear()
    config = CONFIG.format(base_url=upstream.base_url)
    first = start_gateway(tmp_path / "a", config, store_url=shared)
    try:
        second = start_gateway(tmp_path / "b", config, store_url=shared)
    except BaseException:
        first.stop()
        raise
    yield first, second
    first.stop()
    second.stop()


def _chat_url(gateway: GatewayProcess) -> str:
    return f"{gateway.base_url}/chat/completions"


async def _post_all(
    targets: list[tuple[GatewayProcess, str]], body: dict[str, object], extra: dict[str, str]
) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return await asyncio.gather(
            *[
                client.post(
                    _chat_url(gw), json=body, headers={"Authorization": f"Bearer {key}", **extra}
                )
                for gw, key in targets
            ]
        )


def _ledger_sum(gateway: GatewayProcess, key: str) -> tuple[Decimal, list[dict[str, str]]]:
    entries: list[dict[str, str]] = []
    after = None
    while True:
        params = {"limit": "100", **({"after": after} if after else {})}
        page = httpx.get(
            f"{gateway.base_url}/wallet/ledger",
            params=params,
            headers={"Authorization": f"Bearer {key}"},
        ).json()
        entries += page["data"]
        if not page["has_more"]:
            break
        after = page["next_after"]
    return sum((Decimal(e["amount_credits"]) for e in entries), Decimal(0)), entries


def _balance(gateway: GatewayProcess, key: str) -> Decimal:
    view = httpx.get(f"{gateway.base_url}/wallet", headers={"Authorization": f"Bearer {key}"})
    return Decimal(view.json()["balance_credits"])


def test_small_balance_is_never_overdrawn_by_concurrent_chats(
    replicas: tuple[GatewayProcess, GatewayProcess], upstream: FakeOpenAI
) -> None:
    a, b = replicas
    a.grant("small", "10")
    key_a, key_b = a.new_key("small"), b.new_key("small")
    upstream.enqueue(*[Reply(delay=0.3) for _ in range(40)])
    targets = [(a, key_a) if i % 2 else (b, key_b) for i in range(40)]
    responses = asyncio.run(_post_all(targets, BODY, {}))
    statuses = sorted({r.status_code for r in responses})
    assert set(statuses) <= {200, 402}, [
        r.text for r in responses if r.status_code not in (200, 402)
    ]
    served = sum(r.status_code == 200 for r in responses)
    assert served >= 1 and 402 in statuses
    balance = _balance(a, key_a)
    assert balance >= 0
    assert balance == Decimal(10) - served * CHARGE
    total, entries = _ledger_sum(b, key_b)
    assert total == balance
    assert sum(e["kind"] == "charge" for e in entries) == served
    assert len(upstream.requests) == served


def test_idempotency_key_used_on_one_replica_is_replayed_by_the_other(
    replicas: tuple[GatewayProcess, GatewayProcess], upstream: FakeOpenAI
) -> None:
    a, b = replicas
    a.grant("rich", "100")
    key = a.new_key("rich")
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "cross-replica-1"}
    first = httpx.post(_chat_url(a), json=BODY, headers=headers)
    second = httpx.post(_chat_url(b), json=BODY, headers=headers)
    assert first.status_code == second.status_code == 200
    assert second.headers["idempotent-replayed"] == "true"
    assert second.json() == first.json()
    assert len(upstream.requests) == 1
    assert _balance(b, key) == Decimal(100) - CHARGE


def test_requests_per_minute_is_exact_across_replicas(
    replicas: tuple[GatewayProcess, GatewayProcess],
) -> None:
    a, b = replicas
    key = a.new_key("limited")
    statuses = [
        httpx.get(f"{gw.base_url}/models", headers={"Authorization": f"Bearer {key}"}).status_code
        for gw in [a, b] * 12
    ]
    assert statuses.count(200) == 10
    assert statuses.count(429) == 14


def test_a_hundred_concurrent_requests_with_one_key_make_one_upstream_call(
    replicas: tuple[GatewayProcess, GatewayProcess], upstream: FakeOpenAI
) -> None:
    a, b = replicas
    a.grant("rich", "100")
    key = a.new_key("rich")
    upstream.enqueue(Reply(delay=1.0))
    targets = [(a if i % 2 else b, key) for i in range(120)]
    responses = asyncio.run(_post_all(targets, BODY, {"Idempotency-Key": "one-of-many"}))
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 409}
    fresh = [
        r for r in responses if r.status_code == 200 and "idempotent-replayed" not in r.headers
    ]
    assert len(fresh) == 1
    assert len(upstream.requests) == 1
    _, entries = _ledger_sum(a, key)
    assert sum(e["kind"] == "charge" for e in entries) == 1
    assert _balance(b, key) == Decimal(100) - CHARGE
    replay = httpx.post(
        _chat_url(b),
        json=BODY,
        headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "one-of-many"},
    )
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json()["id"] == fresh[0].json()["id"]
