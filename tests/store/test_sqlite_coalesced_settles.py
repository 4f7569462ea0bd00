"""The SQLite store commits the settlements of one loop turn in one transaction, each in a
savepoint: money stays exact, a settlement that fails is rolled back alone and keeps its hold,
a transaction that cannot be taken fails them all and charges none."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome, Settlement
from gateway.store.sqlite import SqliteStore, ops
from tests.store.support import Run, admission, settlement

GRANT = 100_000


@pytest.fixture
def store(tmp_path: Path, run: Run) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "g.db", busy_timeout_ms=100)
    run(s.open())
    run(s.grant("t1", GRANT, entry_id="g1", reason="top-up"))
    yield s
    run(s.close())


@pytest.fixture
def begun(store: SqliteStore) -> list[str]:
    """The write transactions the store's connection begins from now on."""
    seen: list[str] = []
    store._db.set_trace_callback(lambda sql: seen.append(sql) if sql == "BEGIN IMMEDIATE" else None)
    return seen


def _admitted(store: SqliteStore, run: Run, n: int) -> list[Settlement]:
    settlements = []
    for i in range(n):
        adm = admission(f"c{i}", hold=1_000)
        assert run(store.admit(adm)).outcome is AdmissionOutcome.ADMITTED
        settlements.append(settlement(adm, charge=100 + i))
    return settlements


def _settle_all(store: SqliteStore, settlements: list[Settlement]) -> Any:
    return asyncio.gather(*(store.settle(s) for s in settlements), return_exceptions=True)


def test_settles_of_one_turn_commit_together_and_exactly(
    store: SqliteStore, run: Run, begun: list[str]
) -> None:
    settlements = _admitted(store, run, 20)
    assert len(begun) == 1  # admissions write nothing but the key's last use, once a minute
    begun.clear()
    balances = run(_settle_all(store, settlements))
    charges = [100 + i for i in range(20)]
    # In the order they came, each balance after the charges before it and its own.
    assert balances == [GRANT - sum(charges[: i + 1]) for i in range(20)]
    assert len(begun) == 1
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (GRANT - sum(charges), 0)
    entries = run(store.ledger("t1", limit=50)).entries
    assert sorted(e.id for e in entries if e.kind == "charge") == sorted(
        f"charge:c{i}" for i in range(20)
    )
    # A settlement repeated later charges nothing more (the charge's id is the call's).
    assert run(store.settle(settlements[0])) == GRANT - sum(charges)
    assert len(begun) == 2


def test_a_failing_settle_is_rolled_back_alone_and_keeps_its_hold(
    store: SqliteStore, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    settle = ops.settle

    def failing(conn: sqlite3.Connection, s: Settlement, *args: Any) -> int:
        balance = settle(conn, s, *args)  # its charge is written, then the body fails
        if s.call.call_id == "c2":
            raise sqlite3.OperationalError("disk I/O error")
        return balance

    monkeypatch.setattr(ops, "settle", failing)
    settlements = _admitted(store, run, 5)
    outcomes = run(_settle_all(store, settlements))
    assert isinstance(outcomes[2], StoreUnavailable)
    assert all(isinstance(o, int) for i, o in enumerate(outcomes) if i != 2)
    charged = sum(100 + i for i in range(5) if i != 2)
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (GRANT - charged, 1_000)
    assert outcomes[4] == GRANT - charged
    ids = {e.id for e in run(store.ledger("t1", limit=50)).entries}
    assert "charge:c2" not in ids and {"charge:c0", "charge:c4"} <= ids
    monkeypatch.setattr(ops, "settle", settle)
    assert run(store.settle(settlements[2])) == GRANT - charged - 102  # settled when retried


def test_a_transaction_that_cannot_begin_fails_every_settle_and_charges_none(
    tmp_path: Path, store: SqliteStore, run: Run
) -> None:
    settlements = _admitted(store, run, 3)
    other = sqlite3.connect(tmp_path / "g.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # the CLI holds the write lock past the busy timeout
        outcomes = run(_settle_all(store, settlements))
        other.execute("ROLLBACK")
    finally:
        other.close()
    assert all(isinstance(o, StoreUnavailable) for o in outcomes)
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (GRANT, 3_000)
    assert run(_settle_all(store, settlements)) == [GRANT - 100, GRANT - 201, GRANT - 303]


def test_a_settle_cancelled_before_its_turn_ends_is_not_written(
    store: SqliteStore, run: Run
) -> None:
    first, second = _admitted(store, run, 2)

    async def main() -> int:
        cancelled = asyncio.ensure_future(store.settle(first))
        kept = asyncio.ensure_future(store.settle(second))
        await asyncio.sleep(0)  # both are queued
        cancelled.cancel()
        return await kept

    assert run(main()) == GRANT - 101
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (GRANT - 101, 1_000)
    assert run(store.settle(first)) == GRANT - 201
