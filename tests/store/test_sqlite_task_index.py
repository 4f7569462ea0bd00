"""The SQLite task listing's indexes: every filter combination is one index range (its query
plan says so), and a schema-4 file gains the indexes and `completed_at` when opened."""

from __future__ import annotations

import itertools
import sqlite3
import time
from pathlib import Path

from gateway.store.base import TaskFinal
from gateway.store.sqlite import SqliteStore
from gateway.store.sqlite.schema import SCHEMA_VERSION
from gateway.store.sqlite.task_index import listing_query
from tests.store.listing_support import make_task
from tests.store.support import Run
from tests.support.clock import Clock

_INDEX = {
    (False, False): "tasks_by_tenant",
    (True, False): "tasks_by_status",
    (False, True): "tasks_by_capability",
    (True, True): "tasks_by_both",
}
_NEW_INDEXES = ("tasks_by_status", "tasks_by_capability", "tasks_by_both", "tasks_ended")


def _plan(conn: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> list[str]:
    return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]


def _check_plans(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        for status, capability, after in itertools.product(
            (None, "queued"), (None, "text_to_music"), (None, "task_1")
        ):
            sql, params = listing_query(
                "t1", limit=20, after=after, status=status, capability=capability
            )
            plan = _plan(conn, sql, params)
            index = _INDEX[status is not None, capability is not None]
            main = f"SEARCH tasks USING INDEX {index} (tenant=?"
            assert plan[0].startswith(main), (status, capability, after, plan)
            assert plan[0].endswith("AND seq<?)" if after else "=?)"), plan
            # The `after` lookup is one unique-index search; nothing is scanned or sorted.
            assert not [step for step in plan if "SCAN" in step or "TEMP B-TREE" in step], plan
    finally:
        conn.close()


def test_every_filter_combination_is_one_index_range(tmp_path: Path, run: Run) -> None:
    store = SqliteStore(tmp_path / "g.db")
    run(store.open())
    try:
        for i in range(50):
            run(make_task(store, f"task_{i}", capability="text_to_image"))
    finally:
        run(store.close())
    _check_plans(tmp_path / "g.db")


def test_a_schema_4_file_gains_the_listing_indexes_and_completed_at(
    tmp_path: Path, run: Run
) -> None:
    path = tmp_path / "g.db"
    store = SqliteStore(path)
    run(store.open())
    try:
        for task_id in ("task_0", "task_1", "task_2"):
            run(make_task(store, task_id, capability="text_to_music"))
        run(store.finalize_task(TaskFinal(tenant="t1", task_id="task_1", status="succeeded")))
    finally:
        run(store.close())
    old = sqlite3.connect(path, isolation_level=None)  # back to what schema 4 made
    try:
        for index in (*_NEW_INDEXES, "tasks_unconfirmed"):
            old.execute(f"DROP INDEX IF EXISTS {index}")
        old.execute("ALTER TABLE tasks DROP COLUMN completed_at")
        old.execute("PRAGMA user_version = 4")
    finally:
        old.close()

    clock = Clock(time.time())
    store = SqliteStore(path, clock=clock)
    run(store.open())
    try:
        page = run(store.list_tasks("t1", limit=5, status="queued", capability="text_to_music"))
        assert [t.task_id for t in page.tasks] == ["task_2", "task_0"]
        store.set_task_retention(86_400)
        assert run(store.sweep_tasks()) == 0
        clock.advance(86_400 + 1)  # a day after task_1 ended (its record's completed_at)
        assert run(store.sweep_tasks()) == 1
        assert run(store.get_task("t1", "task_1")) is None
        assert [t.task_id for t in run(store.list_tasks("t1", limit=5)).tasks] == [
            "task_2",
            "task_0",
        ]
    finally:
        run(store.close())
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
        names = {row[1] for row in check.execute("PRAGMA index_list(tasks)")}
        assert set(_NEW_INDEXES) <= names
        tables = {row[0] for row in check.execute("SELECT name FROM sqlite_master")}
        assert {"callbacks", "callback_secrets"} <= tables  # schema 6
    finally:
        check.close()
    _check_plans(path)
