"""The Redis task listing's indexes: kept in step by the scripts, passed over and cleaned when a
hash expired first, removed by the sweep, and backfilled once for tasks written before them."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from gateway.store.base import TaskFinal, TaskRecord
from gateway.store.redis import RedisStore
from gateway.store.redis.keys import RedisKeys
from tests.store.listing_support import CAPABILITIES, STATUSES, all_pages, make_task
from tests.store.support import Run
from tests.support.waiting import wait_until

Stores = Callable[[], RedisStore]
_T = TypeVar("_T")


async def _wait(awaitable: Awaitable[_T]) -> _T:
    """redis-py types its commands as Awaitable; `run` takes a coroutine."""
    return await awaitable


def _indexes(store: RedisStore, run: Run) -> dict[str, set[str]]:
    """Every index zset of the store's prefix and its members."""
    client, found = store.client, {}
    pattern = store.keys.task_index("*", "*", "*")  # "" matches a "*" too
    for key in run(_scan(client, pattern)):
        members = run(_wait(client.zrange(key, 0, -1)))
        found[key] = {m.decode() for m in members}
    return found


async def _scan(client: Any, pattern: str) -> list[str]:
    return [k.decode() async for k in client.scan_iter(match=pattern, count=1000)]


def _expected_indexes(keys: RedisKeys, tasks: list[TaskRecord]) -> dict[str, set[str]]:
    expected: dict[str, set[str]] = {}
    for t in tasks:
        for key in keys.task_indexes(t.tenant, t.status, t.capability):
            expected.setdefault(key, set()).add(t.task_id)
    return expected


def _mixed(store: RedisStore, run: Run, tenant: str = "t1") -> list[str]:
    ids = [f"task_{i:02d}" for i in range(12)]
    for i, task_id in enumerate(ids):
        run(make_task(store, task_id, tenant=tenant, capability=CAPABILITIES[i % 3]))
    for worker in range(5):
        run(store.claim_task(f"w{worker}", lease_seconds=60))
    run(store.finalize_task(TaskFinal(tenant=tenant, task_id="task_00", status="succeeded")))
    run(store.finalize_task(TaskFinal(tenant=tenant, task_id="task_01", status="failed")))
    run(
        store.finalize_task(TaskFinal(tenant=tenant, task_id="task_07", status="failed"))
    )  # still queued
    run(store.request_cancel(tenant, "task_09"))
    run(store.request_cancel(tenant, "task_02"))  # running: only asked
    return ids


def _records(store: RedisStore, run: Run, ids: list[str], tenant: str = "t1") -> list[TaskRecord]:
    found = [run(store.get_task(tenant, task_id)) for task_id in ids]
    return [t for t in found if t is not None]


def test_every_task_is_in_exactly_its_three_indexes(redis_stores: Stores, run: Run) -> None:
    store = redis_stores()
    tenant = "a%b:c d"  # a tenant name with the template's and Lua patterns' special characters
    ids = _mixed(store, run, tenant)
    tasks = _records(store, run, ids, tenant)
    assert {t.status for t in tasks} == set(STATUSES)
    assert _indexes(store, run) == _expected_indexes(store.keys, tasks)


def test_an_ended_task_expires_after_the_retention(redis_stores: Stores, run: Run) -> None:
    store = redis_stores()
    run(make_task(store, "task_a"))
    run(make_task(store, "task_b"))
    store.set_task_retention(3 * 86_400)
    run(store.finalize_task(TaskFinal(tenant="t1", task_id="task_a", status="succeeded")))
    client, keys = store.client, store.keys
    ttl = run(_wait(client.pttl(keys.task("t1", "task_a"))))
    assert 3 * 86_400_000 - 60_000 < ttl <= 3 * 86_400_000
    assert run(_wait(client.pttl(keys.task("t1", "task_b")))) == -1  # queued: no TTL
    [(member, at)] = run(_wait(client.zrange(keys.task_expiry("t1"), 0, -1, withscores=True)))
    assert abs(at - (time.time() + 3 * 86_400)) < 60
    assert b"task_a" in member
    run(
        store.finalize_task(TaskFinal(tenant="t1", task_id="task_a", status="failed"))
    )  # ended: no change
    assert run(_wait(client.zcard(keys.task_expiry("t1")))) == 1


def test_a_listing_passes_over_expired_hashes_without_a_gap(redis_stores: Stores, run: Run) -> None:
    store = redis_stores()
    ids = [f"task_{i}" for i in range(10)]
    for task_id in ids:
        run(make_task(store, task_id, capability="text_to_music"))
        run(store.finalize_task(TaskFinal(tenant="t1", task_id=task_id, status="succeeded")))
    client, keys = store.client, store.keys
    gone = ["task_9", "task_8", "task_6", "task_5", "task_3"]
    run(
        _wait(client.delete(*(keys.task("t1", i) for i in gone)))
    )  # as their TTL would, before a sweep

    by_status = dict(status="succeeded")
    assert run(all_pages(store, "t1", limit=2, **by_status)) == [
        (["task_7", "task_4"], True),
        (["task_2", "task_1"], True),
        (["task_0"], False),
    ]
    index = keys.task_index("t1", "succeeded")
    assert {m.decode() for m in run(_wait(client.zrange(index, 0, -1)))} == {
        "task_7", "task_4", "task_2", "task_1", "task_0"
    }  # fmt: skip
    order = run(_wait(client.zrange(keys.tenant_tasks("t1"), 0, -1)))
    assert len(order) == 5  # the listing dropped the expired entries it met here too
    assert run(all_pages(store, "t1", limit=10, capability="text_to_music")) == [
        (["task_7", "task_4", "task_2", "task_1", "task_0"], False)
    ]
    assert run(store.list_tasks("t1", limit=3, after="task_9")).tasks == []  # gone, unknown now


def test_the_sweep_removes_every_entry_of_an_expired_task(redis_stores: Stores, run: Run) -> None:
    store = redis_stores()
    ids = _mixed(store, run)
    store.set_task_retention(0.3)
    for task_id in ("task_10", "task_11"):
        run(store.finalize_task(TaskFinal(tenant="t1", task_id=task_id, status="succeeded")))
    swept: list[int] = []  # the two expire 0.3 s after their own finalize: maybe in two sweeps

    def sweep() -> int:
        swept.append(run(store.sweep_tasks()))
        return sum(swept)

    wait_until(sweep, lambda total: total >= 2, what="the expired tasks swept")
    assert sum(swept) == 2
    tasks = _records(store, run, ids)
    assert sorted(t.task_id for t in tasks) == sorted(set(ids) - {"task_10", "task_11"})
    assert _indexes(store, run) == _expected_indexes(store.keys, tasks)
    order = run(_wait(store.client.zrange(store.keys.tenant_tasks("t1"), 0, -1)))
    assert {m.decode() for m in order} == {t.task_id for t in tasks}


def _as_before_the_indexes(store: RedisStore, run: Run) -> None:
    """What a store written by the previous version holds: no index zsets, no expiry entries,
    no TTLs on ended tasks, no version marker."""
    client, keys = store.client, store.keys
    for key in _indexes(store, run):
        run(_wait(client.delete(key)))
    run(_wait(client.delete(keys.task_expiry("t1"), keys.task_index_version())))
    for key in run(_scan(client, keys.task_pattern())):
        run(_wait(client.persist(key)))


def test_the_backfill_indexes_older_tasks_once(redis_stores: Stores, run: Run) -> None:
    store = redis_stores()
    ids = _mixed(store, run)
    tasks = _records(store, run, ids)
    expected = _expected_indexes(store.keys, tasks)
    _as_before_the_indexes(store, run)
    # Ended 40 days ago (kept 30): the backfill lets it go at once.
    client, keys = store.client, store.keys
    run(_wait(client.hset(keys.task("t1", "task_00"), "completed_at", time.time() - 40 * 86_400)))
    assert run(store.list_tasks("t1", limit=10, status="queued")).tasks == []  # not indexed

    assert run(store.backfill_task_indexes()) == len(ids)
    assert _indexes(store, run) == expected
    assert run(_wait(client.get(keys.task_index_version()))) == b"1"
    assert run(store.get_task("t1", "task_00")) is None  # its retention had run out
    ttl = run(_wait(client.pttl(keys.task("t1", "task_01"))))  # ended just now: 30 days from then
    assert 30 * 86_400_000 - 60_000 < ttl <= 30 * 86_400_000
    assert run(_wait(client.pttl(keys.task("t1", "task_03")))) == -1  # running: kept
    assert run(store.sweep_tasks()) == 1
    tasks = [t for t in tasks if t.task_id != "task_00"]
    assert _indexes(store, run) == _expected_indexes(keys, tasks)
    for status in STATUSES:
        page = run(store.list_tasks("t1", limit=100, status=status))
        want = sorted((t for t in tasks if t.status == status), key=lambda t: -t.created_at)
        assert [t.task_id for t in page.tasks] == [t.task_id for t in want]

    # Once: this store, and another one (a restart), find the marker and do nothing.
    assert run(store.backfill_task_indexes()) == 0
    assert run(redis_stores().backfill_task_indexes()) == 0
    # Idempotent: run again without the marker, the same indexes.
    run(_wait(client.delete(keys.task_index_version())))
    assert run(redis_stores().backfill_task_indexes()) == len(tasks)
    assert _indexes(store, run) == _expected_indexes(keys, tasks)


def test_the_backfill_scans_only_its_own_prefix(
    redis_url: str, redis_prefix: str, run: Run
) -> None:
    glob = RedisStore(redis_url, prefix=f"{redis_prefix}[x]*:")  # glob characters in a prefix
    plain = RedisStore(redis_url, prefix=f"{redis_prefix}x:")
    run(glob.open())
    run(plain.open())
    try:
        run(make_task(glob, "task_a"))
        run(make_task(plain, "task_b"))
        run(make_task(plain, "task_c"))
        run(_wait(glob.client.delete(glob.keys.task_index_version())))
        assert run(glob.backfill_task_indexes()) == 1
        assert run(plain.backfill_task_indexes()) == 2
    finally:
        run(glob.close())
        run(plain.close())


def test_an_unindexed_task_enters_every_index_at_its_next_change(
    redis_stores: Stores, run: Run
) -> None:
    store = redis_stores()
    for task_id in ("task_a", "task_b"):
        run(make_task(store, task_id, capability="text_to_music"))
    _as_before_the_indexes(store, run)  # as a replica of the previous version wrote them
    run(store.claim_task("w1", lease_seconds=60))  # task_a runs, under this version
    run(store.finalize_task(TaskFinal(tenant="t1", task_id="task_a", status="succeeded")))
    [task_a] = _records(store, run, ["task_a"])
    assert _indexes(store, run) == _expected_indexes(store.keys, [task_a])
    page = run(store.list_tasks("t1", limit=5, capability="text_to_music"))
    assert [t.task_id for t in page.tasks] == ["task_a"]  # task_b waits for a change (or reindex)
