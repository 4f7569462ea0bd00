"""What one page of tasks costs with 11,000 tasks of one tenant, nearly all of them not matching:
counted, never timed. On Redis, the commands the server ran for the listing (`INFO
commandstats` before and after); on SQLite, the virtual machine steps of the listing's
statement, against the same listing on a store without the 11,000."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from gateway.store.base import Store, TaskFinal
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore
from gateway.store.sqlite.task_index import listing_query
from tests.store.listing_support import make_task, make_tasks
from tests.store.support import Run

_T = TypeVar("_T")

TASKS = 11_000
RARE = 5
"""The oldest tasks, of the rare capability: a filter on it finds them at the very end."""

_LISTINGS: list[tuple[dict[str, Any], list[str]]] = [
    ({"capability": "text_to_music"}, ["rare_4", "rare_3", "rare_2", "rare_1", "rare_0"]),
    ({"status": "running"}, ["rare_2", "rare_1", "rare_0"]),
    ({"status": "running", "capability": "text_to_music"}, ["rare_2", "rare_1", "rare_0"]),
    ({"status": "queued", "capability": "text_to_music"}, ["rare_4", "rare_3"]),
    ({"status": "succeeded"}, ["bulk_09000", "bulk_06000", "bulk_03000"]),
    ({"status": "canceled", "capability": "text_to_image"}, ["bulk_05000", "bulk_00004"]),
    ({"status": "failed"}, []),
]


async def _wait(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


def _tenant(store: Store, run: Run, *, bulk: int) -> None:
    """RARE music tasks (three running), then `bulk` image tasks, a few of them ended."""
    for i in range(RARE):
        run(make_task(store, f"rare_{i}", capability="text_to_music"))
    for worker in range(3):
        claimed = run(store.claim_task(f"w{worker}", lease_seconds=600))
        assert claimed is not None and claimed.task_id == f"rare_{worker}"
    run(make_tasks(store, ((f"bulk_{i:05d}", "text_to_image") for i in range(bulk)), at_once=200))
    for task_id in ("bulk_09000", "bulk_06000", "bulk_03000"):
        if int(task_id[5:]) < bulk:
            run(store.finalize_task(TaskFinal(tenant="t1", task_id=task_id, status="succeeded")))
    for task_id in ("bulk_05000", "bulk_00004"):
        if int(task_id[5:]) < bulk:
            run(store.request_cancel("t1", task_id))


def _ids(store: Store, run: Run, limit: int, **filters: Any) -> tuple[list[str], bool]:
    page = run(store.list_tasks("t1", limit=limit, **filters))
    return [t.task_id for t in page.tasks], page.has_more


def _calls(store: RedisStore, run: Run) -> dict[str, int]:
    stats: Any = run(_wait(store.client.info("commandstats")))
    return {name: int(s["calls"]) for name, s in stats.items() if name != "cmdstat_info"}


def test_a_redis_page_costs_commands_for_its_own_tasks_only(redis_stores: Any, run: Run) -> None:
    store: RedisStore = redis_stores()
    _tenant(store, run, bulk=TASKS - RARE)
    assert run(_wait(store.client.zcard(store.keys.tenant_tasks("t1")))) == TASKS
    limit = 20
    for filters, expected in _LISTINGS:
        before = _calls(store, run)
        assert _ids(store, run, limit, **filters) == (expected, False), filters
        after = _calls(store, run)
        used = {name: n - before.get(name, 0) for name, n in after.items()}
        used = {name: n for name, n in used.items() if n}
        # One range read of one index, then one hash per task shown (and none other).
        assert used.get("cmdstat_hgetall", 0) == len(expected), (filters, used)
        assert sum(used.values()) <= len(expected) + 1, (filters, used)

    # A page in the middle of a long match: O(limit) too, `after` costing one ZSCORE.
    before = _calls(store, run)
    ids, more = _ids(store, run, limit, status="queued", after="bulk_08000")
    after = _calls(store, run)
    assert more and len(ids) == limit and all(i.startswith("bulk_") for i in ids)
    used = {name: n - before.get(name, 0) for name, n in after.items() if n != before.get(name)}
    assert used.get("cmdstat_hgetall") == limit + 1
    assert sum(used.values()) <= limit + 3, used


def _steps(path: Path, limit: int, filters: dict[str, Any]) -> tuple[int, list[str]]:
    """The VM instructions one listing statement runs (counted by a progress handler)."""
    conn = sqlite3.connect(path)
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    try:
        conn.set_progress_handler(count, 1)
        sql, params = listing_query("t1", limit=limit, **filters)
        rows = conn.execute(sql, params).fetchall()
    finally:
        conn.close()
    return steps, [str(row[0]) for row in rows]


def test_a_sqlite_page_costs_the_same_with_or_without_11000_others(
    tmp_path: Path, run: Run
) -> None:
    costs: dict[int, list[int]] = {}
    for bulk in (TASKS - RARE, 10):  # the same matches among 11,000 tasks or among 15
        path = tmp_path / f"{bulk}.db"
        store = SqliteStore(path)
        run(store.open())
        try:
            _tenant(store, run, bulk=bulk)
            for filters, expected in _LISTINGS[:4]:  # the matches both stores have
                assert _ids(store, run, 20, **filters) == (expected, False), filters
        finally:
            run(store.close())
        costs[bulk] = [_steps(path, 20, filters)[0] for filters, _ in _LISTINGS[:4]]
    for big, small in zip(costs[TASKS - RARE], costs[10], strict=True):
        assert big <= small + 20, costs  # however many do not match: the same steps
