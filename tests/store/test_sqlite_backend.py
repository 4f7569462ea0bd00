"""What only the SQLite backend has: a file shared by processes, and its lock timeout."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome
from gateway.store.sqlite import SqliteStore
from tests.store.support import Run, admission


def test_two_connections_on_one_file_share_state(tmp_path: Path, run: Run) -> None:
    a, b = SqliteStore(tmp_path / "g.db"), SqliteStore(tmp_path / "g.db")
    run(a.open())
    run(b.open())
    try:
        results = [run((a if i % 2 else b).admit(admission(f"c{i}", rpm=4))) for i in range(6)]
        assert [r.outcome for r in results].count(AdmissionOutcome.ADMITTED) == 4
        run(a.grant("t1", 10, entry_id="g1", reason="x"))
        assert run(b.wallet("t1")).balance_units == 10
    finally:
        run(a.close())
        run(b.close())


def _admit_in_process(path: str, worker: int) -> list[str]:
    async def admit_many() -> list[str]:
        store = SqliteStore(path)
        await store.open()
        try:
            calls = (admission(f"w{worker}-{i}", rpm=20, hold=10) for i in range(40))
            return [(await store.admit(a)).outcome.value for a in calls]
        finally:
            await store.close()

    return asyncio.run(admit_many())


def test_processes_on_one_file_never_overshoot(tmp_path: Path, run: Run) -> None:
    """The CLI and the server share the file: BEGIN IMMEDIATE keeps each check atomic."""
    path = tmp_path / "g.db"
    store = SqliteStore(path)
    run(store.open())
    try:
        run(store.grant("t1", 150, entry_id="g1", reason="x"))
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(4, mp_context=context) as pool:
            batches = pool.map(_admit_in_process, [str(path)] * 4, range(4))
            outcomes = [outcome for batch in batches for outcome in batch]
        # 160 attempts; 150 units for holds of 10: exactly 15 admitted. 20 requests per minute
        # (one more may refill while the processes start): the rest is rate limited.
        assert outcomes.count("admitted") == 15
        assert 20 <= outcomes.count("admitted") + outcomes.count("insufficient_credits") <= 21
        assert run(store.wallet("t1")).held_units == 150
    finally:
        run(store.close())


def test_locked_database_is_store_unavailable(tmp_path: Path, run: Run) -> None:
    store = SqliteStore(tmp_path / "g.db", busy_timeout_ms=50)
    run(store.open())
    other = sqlite3.connect(tmp_path / "g.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with pytest.raises(StoreUnavailable) as caught:
            run(store.admit(admission("c1")))
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        assert run(store.ping()) is True  # reads still work beside a writer (WAL)
        other.execute("ROLLBACK")
        assert run(store.admit(admission("c2"))).outcome is AdmissionOutcome.ADMITTED
    finally:
        other.close()
        run(store.close())


def test_ping_is_false_when_closed(tmp_path: Path, run: Run) -> None:
    store = SqliteStore(tmp_path / "g.db")
    assert run(store.ping()) is False
    run(store.open())
    assert run(store.ping()) is True
    run(store.close())
    assert run(store.ping()) is False
