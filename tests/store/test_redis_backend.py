"""What only the Redis backend has: several replicas on one Redis, script reloads, key TTLs,
and failures translated into StoreUnavailable."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec
import pytest

from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome, ApiKeyRecord
from gateway.store.redis import RedisStore
from tests.store.support import Run, admission, claim, settlement

Stores = Callable[[], RedisStore]
_T = TypeVar("_T")


async def _wait(awaitable: Awaitable[_T]) -> _T:
    """redis-py types its commands as Awaitable; `run` takes a coroutine."""
    return await awaitable


def test_two_replicas_share_the_rate_limit_exactly(redis_stores: Stores, run: Run) -> None:
    a, b = redis_stores(), redis_stores()

    async def burst() -> Counter[AdmissionOutcome]:
        calls = [(a if i % 2 else b).admit(admission(f"c{i}", rpm=10)) for i in range(30)]
        return Counter(r.outcome for r in await asyncio.gather(*calls))

    assert run(burst()) == {AdmissionOutcome.ADMITTED: 10, AdmissionOutcome.RATE_LIMITED: 20}


def test_two_replicas_agree_on_wallet_and_idempotency(redis_stores: Stores, run: Run) -> None:
    a, b = redis_stores(), redis_stores()
    run(a.grant("t1", 100, entry_id="g1", reason="top-up"))
    adm = admission("c1", hold=60, idempotency=claim())
    assert run(a.admit(adm)).outcome is AdmissionOutcome.ADMITTED

    assert run(b.admit(admission("c2", idempotency=claim()))).outcome is (
        AdmissionOutcome.IN_PROGRESS
    )
    assert run(b.admit(admission("c3", hold=60))).outcome is (AdmissionOutcome.INSUFFICIENT_CREDITS)
    assert run(b.settle(settlement(adm, charge=10))) == 90
    assert run(a.wallet("t1")).balance_units == 90


def test_scripts_reload_after_script_flush(redis_stores: Stores, run: Run) -> None:
    store = redis_stores()
    run(store.admit(admission("c1")))
    run(_wait(store.client.script_flush()))
    assert run(store.admit(admission("c2"))).outcome is AdmissionOutcome.ADMITTED


def test_short_lived_state_carries_a_ttl(redis_stores: Stores, run: Run) -> None:
    store = redis_stores()
    k = store.keys
    run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
    adm = admission("c1", rpm=60, tpm=600, tokens=60, hold=10, hold_seconds=30, idempotency=claim())
    run(store.admit(adm))

    def ttl(key: str) -> float:
        return float(run(_wait(store.client.pttl(key)))) / 1000

    assert 0 < ttl(k.rate("t1", "k1")) <= 7.0  # one request / 60 tokens refill in 1 s / 6 s, + 1 s
    assert 29 < ttl(k.holds("t1")) <= 31 and 29 < ttl(k.hold_expiry("t1")) <= 31
    assert 899 < ttl(k.idempotency("t1", claim().scope)) <= 900

    run(store.settle(settlement(adm, charge=5)))
    assert 86_399 < ttl(k.done("t1", "c1")) <= 86_400
    assert ttl(k.wallet("t1")) < 0 and ttl(k.ledger("t1")) < 0  # money never expires


def test_unreachable_redis_is_store_unavailable(run: Run) -> None:
    store = RedisStore("redis://127.0.0.1:1/0", connect_timeout=0.5)
    run(store.open())
    try:
        assert run(store.ping()) is False
        with pytest.raises(StoreUnavailable) as caught:
            run(store.admit(admission("c1")))
        assert caught.value.__cause__ is not None
        with pytest.raises(StoreUnavailable):
            run(store.grant("t1", 1, entry_id="g1", reason="x"))
        with pytest.raises(StoreUnavailable):
            run(store.get_key("hash"))
    finally:
        run(store.close())


def test_closed_store_pings_false(redis_stores: Stores, run: Run) -> None:
    store = redis_stores()
    assert run(store.ping()) is True
    run(store.close())
    assert run(store.ping()) is False


def test_records_written_before_prefix_and_model_still_load(redis_stores: Stores, run: Run) -> None:
    store = redis_stores()
    k = store.keys
    old_entry = msgspec.msgpack.encode(["g1", "t1", "grant", 100, 100, 2.0, "top-up", "", ""])

    async def write_old() -> None:
        await store.client.hset(
            k.legacy_api_key("hash-old"),
            mapping={"key_id": "key_old", "tenant": "t1", "created_at": 1.0},
        )
        await store.client.set(k.api_key_id("key_old"), "hash-old")
        await store.client.zadd(k.tenant_keys("t1"), {"hash-old": 1.0})
        await store.client.hset(k.wallet("t1"), mapping={"balance": 100, "seq": 1})
        await store.client.hset(k.ledger("t1"), "g1", old_entry)
        await store.client.zadd(k.ledger_order("t1"), {"g1": 1})

    run(write_old())
    assert run(store.key_by_id("key_old")) == ApiKeyRecord(
        key_id="key_old", tenant="t1", created_at=1.0
    )
    assert [r.prefix for r in run(store.list_keys("t1"))] == [""]
    old = run(store.ledger_entry("t1", "g1"))
    assert old is not None and (old.model, old.amount_units, old.task_id) == ("", 100, None)
    charge = run(store.grant("t1", -5, entry_id="adj", reason="fix", kind="adjustment"))
    page = run(store.ledger_range("t1", since=0.0, until=charge.created_at + 1, limit=5))
    assert [e.id for e in page.entries] == ["g1", "adj"]
