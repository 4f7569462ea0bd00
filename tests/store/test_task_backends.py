"""Tasks: what only one backend has (SQLite's injected clock, wake-ups and schema migration;
Redis's queue stream and its consumer group)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.store.base import TaskFinal, TaskRecord
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore
from gateway.store.sqlite.schema import SCHEMA_VERSION
from tests.store.support import Run, admission, create_confirmed
from tests.store.task_support import balanced, create, made

# What only one backend has ------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_sqlite_leases_follow_the_injected_clock(tmp_path: Path, run: Run) -> None:
    clock = _Clock()
    store = SqliteStore(tmp_path / "g.db", clock=clock)
    run(store.open())
    try:
        task = made(store, run, create("task_a", price=0))
        assert task.created_at == 1_000_000.0
        claimed = run(store.claim_task("w1", lease_seconds=60))
        assert claimed is not None and claimed.lease_until == 1_000_060.0
        clock.now += 59
        assert run(store.claim_task("w2", lease_seconds=60)) is None
        clock.now += 1
        again = run(store.claim_task("w2", lease_seconds=60))
        assert again is not None and (again.worker_id, again.attempts) == ("w2", 2)
    finally:
        run(store.close())


def test_sqlite_claim_wakes_on_create_not_on_its_poll(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.store.sqlite.tasks._POLL_SECONDS", 30.0)
    store = SqliteStore(tmp_path / "g.db")

    async def scenario() -> tuple[TaskRecord | None, float]:
        await store.open()
        try:
            loop = asyncio.get_running_loop()
            start = loop.time()
            waiting = asyncio.ensure_future(
                store.claim_task("w1", lease_seconds=30, wait_seconds=10)
            )
            await asyncio.sleep(0.05)  # the claim is waiting before the task comes
            await create_confirmed(store, create("task_a", price=0))
            return await waiting, loop.time() - start
        finally:
            await store.close()

    task, took = run(scenario())
    # Woken by the task, not by a poll (30 s) or the end of the wait (10 s).
    assert task is not None and task.task_id == "task_a" and took < 5.0


def test_a_schema_2_file_is_migrated_to_3(tmp_path: Path, run: Run) -> None:
    path = tmp_path / "g.db"
    store = SqliteStore(path)
    run(store.open())
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    run(store.close())
    old = sqlite3.connect(path, isolation_level=None)  # back to what schema 2 had
    old.executescript("DROP TABLE tasks; DROP TABLE artifacts; PRAGMA user_version = 2;")
    old.close()

    store = SqliteStore(path)
    run(store.open())
    try:
        assert balanced(store, run) == 1000  # the data of schema 2 is kept
        made(store, run, create("task_a", price=300))
        assert balanced(store, run) == 700
    finally:
        run(store.close())
    check = sqlite3.connect(path)
    try:
        names = {row[0] for row in check.execute("SELECT name FROM sqlite_master")}
        assert {"tasks", "artifacts", "ledger", "idempotency"} <= names
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        check.close()


def test_redis_queue_entries_go_when_tasks_end(redis_stores: Any, run: Run) -> None:
    a: RedisStore = redis_stores()
    b: RedisStore = redis_stores()
    for name in ("task_a", "task_b", "task_c"):
        made(a, run, create(name, price=0))

    async def both() -> list[TaskRecord | None]:
        return list(
            await asyncio.gather(
                a.claim_task("w1", lease_seconds=30), b.claim_task("w2", lease_seconds=30)
            )
        )

    claimed = run(both())
    assert sorted(t.task_id for t in claimed if t is not None) == ["task_a", "task_b"]
    run(a.request_cancel("t1", "task_c"))
    for task in claimed:
        assert task is not None
        run(b.finalize_task(TaskFinal(tenant="t1", task_id=task.task_id, status="succeeded")))

    shard = a.keys.shard_of("t1")
    queue = a.keys.task_queue(shard)
    assert run(_call(a.client.xlen(queue))) == 0
    assert run(_call(a.client.xpending(queue, "workers")))["pending"] == 0
    assert run(_call(a.client.hlen(a.keys.task_entries(shard)))) == 0
    assert run(_call(a.client.zcard(a.keys.tasks_open("t1")))) == 0


def test_redis_a_live_tasks_entry_comes_back_when_its_lease_would_end(
    redis_stores: Any, run: Run
) -> None:
    """An entry of a running task that looks idle (its worker touches the task, not the entry)
    is met by another claim, found busy, and set to come back when the lease would end."""
    store: RedisStore = redis_stores()
    other: RedisStore = redis_stores()  # w2's process
    made(store, run, create("task_a", price=0))
    leased_at = time.monotonic()
    assert run(store.claim_task("w1", lease_seconds=30)) is not None
    queue = store.keys.task_queue(store.keys.shard_of("t1"))
    [entry] = run(_call(store.client.xpending_range(queue, "workers", "-", "+", 10)))
    run(_call(store.client.xclaim(queue, "workers", "w1", 0, [entry["message_id"]], idle=60_000)))

    assert run(other.claim_task("w2", lease_seconds=30)) is None  # busy: w1's lease is live
    [after] = run(_call(store.client.xpending_range(queue, "workers", "-", "+", 10)))
    assert after["message_id"] == entry["message_id"]
    # Idle again for as long as w1's lease has run (not the 60 s set above): it comes back to
    # a claim when the lease would end. Redis counts in whole ms on its own clock.
    since_lease_ms = (time.monotonic() - leased_at) * 1000
    assert after["time_since_delivered"] <= since_lease_ms + 50, (after, since_lease_ms)
    task = run(store.get_task("t1", "task_a"))
    assert task is not None and (task.worker_id, task.attempts) == ("w1", 1)


def test_redis_waiting_claim_leaves_the_request_path_free(redis_stores: Any, run: Run) -> None:
    store: RedisStore = redis_stores()

    async def scenario() -> float:
        # A long wait (the task created below ends it): calls queued behind the blocking claim
        # would take all of it, a loaded machine takes ~1 s for the 40 calls.
        waiting = asyncio.ensure_future(store.claim_task("w1", lease_seconds=30, wait_seconds=5))
        await asyncio.sleep(0.1)  # the claim is blocking before the calls
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(20):  # the pipeline and the pool both answer while the claim blocks
            await store.admit(admission(f"c{i}"))
            await store.wallet("t1")
        took = loop.time() - start
        await create_confirmed(store, create("task_a", price=0))
        task = await waiting
        assert task is not None and task.task_id == "task_a"
        return took

    assert run(scenario()) < 2.5


def test_redis_queue_recovers_from_a_lost_stream(redis_stores: Any, run: Run) -> None:
    store: RedisStore = redis_stores()
    made(store, run, create("task_a", price=0))
    assert run(store.claim_task("w1", lease_seconds=30)) is not None
    queue = store.keys.task_queue(store.keys.shard_of("t1"))
    run(_call(store.client.delete(queue)))  # stream and group gone

    made(store, run, create("task_b", price=0))  # a new stream, no group yet
    task = run(store.claim_task("w1", lease_seconds=30))  # makes the group again
    assert task is not None and task.task_id == "task_b"


async def _call(awaitable: Any) -> Any:
    return await awaitable
