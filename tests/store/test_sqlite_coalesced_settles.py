"""The SQLite store commits the settlements of one loop turn in one transaction, each in a
savepoint: money stays exact, a settlement that fails is rolled back alone and keeps its hold,
a transaction that cannot be taken fails them all and charges none."""

from __future__ import annotations

import asyncio
import contextlib
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


def test_an_admission_never_counts_a_committed_charge_and_its_hold_both(
    store: SqliteStore, run: Run
) -> None:
    (first,) = _admitted(store, run, 1)  # holds 1_000, charges 100

    async def main() -> list[int]:
        available = []
        settling = asyncio.ensure_future(store.settle(first))
        probes = 0
        while not settling.done():
            probes += 1
            probe = await store.admit(admission(f"probe{probes}"))
            available.append(probe.available_units)
            await asyncio.sleep(0)  # every turn of the loop, until the settle returned
        await settling
        return available

    seen = run(main())
    # Held before the commit, charged after it: never both (a chat refused as the wallet
    # seemed short by the hold of a call already paid for).
    assert GRANT - 1_000 - 100 not in seen
    assert seen[0] == GRANT - 1_000 and seen[-1] == GRANT - 100


def test_a_settle_cancelled_after_its_commit_lets_go_of_its_hold(
    store: SqliteStore, run: Run
) -> None:
    (first,) = _admitted(store, run, 1)

    async def main() -> None:
        settling = asyncio.ensure_future(store.settle(first))
        for _ in range(10):  # turns of the loop, until the charge is in the file
            if (await store.wallet("t1")).balance_units != GRANT:
                break
            await asyncio.sleep(0)
        assert not settling.done()
        settling.cancel()  # its charge committed, its caller not yet resumed
        with contextlib.suppress(asyncio.CancelledError):
            await settling

    run(main())
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (GRANT - 100, 0)


def test_calls_settled_one_after_another_in_one_turn_hold_only_their_charges(
    store: SqliteStore, run: Run
) -> None:
    """Room for three holds of 30_000: six calls, each admitted and answered in the same turn
    of the loop as the ones before it (a burst of short chats), are all admitted, as each
    finished call waits in the turn's transaction for no more than its charge."""

    async def call(i: int) -> AdmissionOutcome:
        adm = admission(f"b{i}", hold=30_000)
        outcome = (await store.admit(adm)).outcome
        if outcome is AdmissionOutcome.ADMITTED:
            await store.settle(settlement(adm, charge=100))
        return outcome

    async def burst() -> list[AdmissionOutcome]:
        return await asyncio.gather(*(call(i) for i in range(6)))

    assert run(burst()) == [AdmissionOutcome.ADMITTED] * 6
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (GRANT - 600, 0)
