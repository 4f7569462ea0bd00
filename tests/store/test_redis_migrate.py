"""`gateway store migrate`: a store written by the previous version (its own scripts and key
formats: tests/store/legacy_store.py) moved to the current layout, checked through the store's
operations; run twice it changes nothing; cut short anywhere and run again, the same result."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import redis.asyncio

from gateway.store.base import (
    AdmissionOutcome,
    ApiKeyRecord,
    ArtifactRecord,
    StoredReply,
    TaskConfirm,
    TaskCreateOutcome,
)
from gateway.store.redis import RedisStore
from gateway.store.redis import migrate as migrate_module
from gateway.store.redis.keys import LegacyKeys
from gateway.store.redis.migrate import migrate_layout
from tests.store.legacy_store import LegacyStore
from tests.store.support import admission, call, claim
from tests.store.task_support import create

Stores = Callable[[], RedisStore]
REPLY = StoredReply(status=200, content_type="application/json", body=b'{"id":"c1"}')
T1_CLAIM = claim("scope-c1")
T1_INFLIGHT = claim("scope-c2")
T2_FREE = claim("scope-c3")
NOW = time.time()


def _artifact(artifact_id: str, tenant: str) -> ArtifactRecord:
    return ArtifactRecord(
        artifact_id=artifact_id,
        tenant=tenant,
        kind="output",
        filename=f"{artifact_id}.png",
        mime_type="image/png",
        size_bytes=3,
        sha256="00",
        blob_key=f"blobs/{artifact_id}",
        created_at=NOW,
        expires_at=NOW + 3600,
    )


async def _fill(old: LegacyStore) -> None:
    """What a gateway of the previous version left: keys, money, chats, tasks, artifacts."""
    await old.create_key(ApiKeyRecord(key_id="k1", tenant="t1", created_at=1.0), "hash-1")
    await old.create_key(ApiKeyRecord(key_id="k2", tenant="t2", created_at=2.0), "hash-2")
    await old.grant("t1", 1_000, "g1")
    await old.grant("t2", 500, "g2")
    charged = call("c1", idempotency=T1_CLAIM, rpm=60)
    await old.admit(charged, hold=100)
    await old.settle(charged, 40, REPLY)  # a completed reply, charged: it moves
    await old.admit(call("c2", idempotency=T1_INFLIGHT, rpm=60), hold=100)  # in flight
    free = call("c3", tenant="t2", api_key_id="k2", idempotency=T2_FREE)
    await old.admit(free, hold=0)
    await old.settle(free, 0, REPLY)  # a reply nothing was charged for: dropped
    for task_id in ("task_q", "task_r", "task_s", "task_f"):
        await old.create_task(task_id, "t1", 100, "text_to_image")
        await old.confirm_task(task_id, "t1")
    assert await old.claim_next("w-old") == "task_q"  # claimed, then ended below
    assert await old.claim_next("w-old") == "task_r"  # left running (its worker is stopped)
    assert await old.claim_next("w-old") == "task_s"
    await old.finalize("task_q", "succeeded", 0)
    await old.finalize("task_s", "failed", 100)
    await old.create_task("task_u", "t1", 70, "text_to_music", scope="scope-task")
    await old.create_artifact(_artifact("art_1", "t1"))
    await old.create_artifact(_artifact("art_2", "t2"))


async def _check(store: RedisStore) -> None:
    """The migrated store, read and used through the store's operations."""
    # Keys, wallets and ledgers: the same, and wallet = ledger.
    key = await store.get_key("hash-1")
    assert key is not None and key.tenant == "t1"
    assert [k.key_id for k in await store.list_keys("t2")] == ["k2"]
    for tenant, balance in (("t1", 1_000 - 40 - 400 + 100), ("t2", 500)):
        wallet = await store.wallet(tenant)
        entries = (await store.ledger(tenant, limit=100)).entries
        assert wallet.balance_units == balance == sum(e.amount_units for e in entries)
    assert (await store.wallet("t1")).held_units == 100 + 70  # c2's hold, task_u's

    # The charged reply replays; the free one and the one in flight were dropped.
    replay = await store.admit(admission("c9", idempotency=T1_CLAIM))
    assert (replay.outcome, replay.reply) == (AdmissionOutcome.REPLAY, REPLY)
    free = await store.admit(admission("c8", tenant="t2", api_key_id="k2", idempotency=T2_FREE))
    assert free.outcome is AdmissionOutcome.ADMITTED

    # Tasks: as they were, listed and indexed; the queued one is in its shard's queue.
    statuses = {t.task_id: t.status for t in (await store.list_tasks("t1", limit=10)).tasks}
    assert statuses == {
        "task_q": "succeeded",
        "task_s": "failed",
        "task_r": "running",
        "task_f": "queued",
    }
    failed = (await store.list_tasks("t1", limit=10, status="failed")).tasks
    assert [t.task_id for t in failed] == ["task_s"]
    assert await store.task_queue_depth() == 2  # task_f, and task_r's entry (a stopped worker's)
    taken = await store.claim_task("w-new", lease_seconds=30)
    assert taken is not None and taken.task_id == "task_f"
    assert await store.claim_task("w-new", lease_seconds=30) is None  # task_r: its lease lives
    assert await store.task_queue_depth() == 0

    # The unconfirmed create: its idempotency record still says in progress, its confirm debits.
    same = claim("scope-task", "fp-task")
    again = await store.create_task(create("task_x", price=70, idempotency=same))
    assert again.outcome is TaskCreateOutcome.IN_PROGRESS
    confirmed = await store.confirm_task(TaskConfirm(tenant="t1", task_id="task_u"))
    assert confirmed is not None and confirmed.status == "queued"
    assert (await store.wallet("t1")).balance_units == 1_000 - 40 - 400 + 100 - 70

    # Artifacts, by id alone, and in the expiry sweep.
    found = await store.get_artifact(None, "art_2")
    assert found is not None and found.tenant == "t2"
    assert {a.artifact_id for a in await store.expired_artifacts(NOW + 7200, 10)} == {
        "art_1",
        "art_2",
    }


async def _old_keys(client: Any, prefix: str) -> list[str]:
    legacy = LegacyKeys(prefix)
    names = [k.decode() async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
    return sorted(n for n in names if legacy.kind_of(n) is not None)


def _scenario(
    redis_url: str, prefix: str, run: Callable[[Coroutine[Any, Any, Any]], Any]
) -> tuple[RedisStore, redis.asyncio.Redis]:
    store = RedisStore(redis_url, prefix=prefix)
    client = redis.asyncio.Redis.from_url(redis_url)
    run(store.open())
    run(_fill(LegacyStore(client, prefix)))
    return store, client


def test_a_store_of_the_previous_layout_moves_whole(
    redis_url: str, redis_prefix: str, run: Callable[[Coroutine[Any, Any, Any]], Any]
) -> None:
    store, client = _scenario(redis_url, redis_prefix, run)
    try:
        assert run(_old_keys(client, redis_prefix))  # the previous layout, as written
        report = run(migrate_layout(store))
        assert report.moved["task"] == 5 and report.moved["artifact"] == 2
        assert report.moved["idem"] == 2  # the charged reply, the task create's record
        assert report.dropped["idem"] == 2  # the free reply, the one in flight
        assert run(_old_keys(client, redis_prefix)) == []
        again = run(migrate_layout(store))  # run twice: nothing left to do
        assert again.lines() == ["nothing to migrate: the store is in the current layout"]
        run(_check(store))
    finally:
        run(store.close())
        run(client.aclose())


@pytest.mark.parametrize("cut_after", [1, 3, 6])
def test_a_migration_cut_short_then_run_again_ends_the_same(
    redis_url: str,
    redis_prefix: str,
    run: Callable[[Coroutine[Any, Any, Any]], Any],
    monkeypatch: pytest.MonkeyPatch,
    cut_after: int,
) -> None:
    store, client = _scenario(redis_url, redis_prefix, run)
    moves = 0
    real_move = migrate_module._Migration._move

    async def cut(self: Any, old: str, new: str) -> bool:
        nonlocal moves
        moves += 1
        if moves > cut_after:
            raise KeyboardInterrupt  # the operator's ^C, between two keys
        return await real_move(self, old, new)

    try:
        monkeypatch.setattr(migrate_module._Migration, "_move", cut)
        with pytest.raises(KeyboardInterrupt):
            run(migrate_layout(store))
        monkeypatch.setattr(migrate_module._Migration, "_move", real_move)
        run(migrate_layout(store))
        assert run(_old_keys(client, redis_prefix)) == []
        run(_check(store))
    finally:
        run(store.close())
        run(client.aclose())
