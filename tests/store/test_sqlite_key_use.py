"""A key's last use on SQLite is in the file: every process on it answers the same time, and
the request path writes it at most once a minute per key and process (never per call), never
lowering what another process wrote."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.store.base import AdmissionOutcome, ApiKeyRecord
from gateway.store.sqlite import SqliteStore
from gateway.store.sqlite.api_keys import USE_RECORD_SECONDS
from tests.store.support import Run, admission, release
from tests.support.clock import Clock

ADMITTED = AdmissionOutcome.ADMITTED


@pytest.fixture
def clocks() -> tuple[Clock, Clock]:
    return Clock(), Clock()


@pytest.fixture
def stores(tmp_path: Path, run: Run, clocks: tuple[Clock, Clock]) -> Iterator[list[SqliteStore]]:
    opened = [SqliteStore(tmp_path / "g.db", clock=clock) for clock in clocks]
    for store in opened:
        run(store.open())
    run(opened[0].create_key(ApiKeyRecord(key_id="k1", tenant="t1", created_at=1.0), "hash-1"))
    yield opened
    for store in opened:
        run(store.close())


def _last_used(stores: list[SqliteStore], run: Run) -> list[float | None]:
    """The key's last use as each store answers it, by id and in its tenant's list."""
    seen: list[float | None] = []
    for store in stores:
        record = run(store.key_by_id("k1"))
        assert record is not None
        [listed] = run(store.list_keys("t1"))
        assert listed.last_used_at == record.last_used_at
        seen.append(record.last_used_at)
    return seen


def test_every_process_answers_the_last_use_one_of_them_recorded(
    stores: list[SqliteStore], run: Run, clocks: tuple[Clock, Clock]
) -> None:
    first = stores[0]
    assert _last_used(stores, run) == [None, None]
    at = clocks[0].now
    assert run(first.admit(admission("c1"))).outcome is ADMITTED
    assert _last_used(stores, run) == [at, at]


def test_a_key_s_use_is_written_at_most_once_a_minute_per_process(
    stores: list[SqliteStore], run: Run, clocks: tuple[Clock, Clock], tmp_path: Path
) -> None:
    first, clock = stores[0], clocks[0]
    recorded = clock.now
    assert run(first.admit(admission("c1"))).outcome is ADMITTED
    with sqlite3.connect(tmp_path / "g.db") as watcher:

        def version() -> int:
            return int(watcher.execute("PRAGMA data_version").fetchone()[0])

        before = version()
        for step in range(1, 6):  # calls within the minute: the file is not written
            clock.advance(USE_RECORD_SECONDS / 6)
            admitted = admission(f"c1-{step}")
            assert run(first.admit(admitted)).outcome is ADMITTED
            run(first.release(release(admitted)))
            assert _last_used(stores, run) == [recorded, recorded]
        assert version() == before
        clock.advance(USE_RECORD_SECONDS / 6)  # a minute after the last write: written again
        assert run(first.admit(admission("c2"))).outcome is ADMITTED
        assert _last_used(stores, run) == [clock.now, clock.now]
        assert version() != before


def test_an_older_use_never_replaces_a_later_one(
    stores: list[SqliteStore], run: Run, clocks: tuple[Clock, Clock]
) -> None:
    first, second = stores
    clocks[1].advance(-30)  # the second process's admission is earlier than the first's
    assert run(first.admit(admission("c1"))).outcome is ADMITTED
    assert run(second.admit(admission("c2"))).outcome is ADMITTED
    assert _last_used(stores, run) == [clocks[0].now, clocks[0].now]
    clocks[1].advance(60)  # a later use by the second process is the key's last use
    assert run(second.admit(admission("c3"))).outcome is ADMITTED
    assert _last_used(stores, run) == [clocks[1].now, clocks[1].now]
