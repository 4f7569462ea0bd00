"""The store behind Sentinel (a primary, a replica, three sentinels): it works through the
sentinels' primary, and when that primary is killed it follows the new one (the pipelined
client and redis-py both ask the sentinels again) with only retryable failures meanwhile; a
sentinel that never answers costs no reconnect more than its own timeout."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome
from gateway.store.redis import RedisStore
from tests.store.support import Run, admission, settlement
from tests.support.redis_sentinel import LocalSentinel
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until


@pytest.fixture
def sentinel(redis_binary: str, tmp_path: Path) -> Iterator[LocalSentinel]:
    with LocalSentinel.running(redis_binary, tmp_path / "sentinel") as running:
        yield running


def _paid_call(store: RedisStore, run: Run, call_id: str, charge: int) -> bool:
    """One call admitted and settled; False when the store was unavailable for it."""
    adm = admission(call_id, hold=charge, rpm=0)
    try:
        assert run(store.admit(adm)).outcome is AdmissionOutcome.ADMITTED
        run(store.settle(settlement(adm, charge=charge)))
    except StoreUnavailable:
        return False
    return True


@STORE_FAULTS
def test_the_store_follows_the_primary_through_a_failover(
    sentinel: LocalSentinel, run: Run
) -> None:
    store = RedisStore(sentinel.url, prefix="st:")
    run(store.open())
    try:
        run(store.grant("t1", 1_000, entry_id="g1", reason="start"))
        assert _paid_call(store, run, "c1", 10)
        before = sentinel.primary_port()
        sentinel.primary.kill()
        # Until the sentinels promote the replica, calls fail as StoreUnavailable (retryable).
        wait_until(lambda: not _paid_call(store, run, "c-down", 1), what="a refused call")
        wait_until(lambda: sentinel.primary_port() != before, timeout=30, what="a new primary")
        sentinel.primary.start()  # back, as the new primary's replica
        wait_until(sentinel.replicated, timeout=30, what="the new primary's replica")
        # The store talks to the new primary: calls and money writes (which wait for the
        # replica) go through again, and what was answered before is there. Each try is a new
        # call: one that failed after its admission (a replica still catching up) is
        # abandoned, as a client's retry would be a new call too.
        tries = itertools.count()

        def paid_call() -> str | None:
            call_id = f"c2-{next(tries)}"
            return call_id if _paid_call(store, run, call_id, 5) else None

        paid = wait_until(
            paid_call, lambda call: call is not None, what="a call on the new primary"
        )
        entries = run(store.ledger("t1", limit=100)).entries
        charges = {e.id for e in entries if e.kind == "charge"}
        assert {"charge:c1", f"charge:{paid}"} <= charges
        balance = run(store.wallet("t1")).balance_units
        assert balance == sum(e.amount_units for e in entries)
        assert run(store.grant("t1", 1, entry_id="g2", reason="after")).amount_units == 1
    finally:
        run(store.close())


@contextlib.contextmanager
def _silent_listener() -> Iterator[int]:
    """A port that takes connections (the kernel completes them) and never answers: a sentinel
    behind a dropped route, as slow to fail as one can be."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield int(listener.getsockname()[1])


@STORE_FAULTS
def test_a_sentinel_that_never_answers_costs_no_reconnect_its_failure(
    sentinel: LocalSentinel, run: Run
) -> None:
    with _silent_listener() as silent:
        # Named first: asked one after another, it would take the whole connect budget.
        url = sentinel.url.replace("sentinel://", f"sentinel://127.0.0.1:{silent},")
        store = RedisStore(url, prefix="us:", socket_timeout=2.0, connect_timeout=1.0)
        run(store.open())
        try:
            run(store.grant("t1", 1_000, entry_id="g1", reason="start"))
            for i in range(3):
                # Every connection of the store is cut, as a failover does: each reconnects,
                # asking the sentinels again.
                with redis.Redis(port=sentinel.primary_port()) as admin:
                    assert admin.client_kill_filter(_type="normal") >= 1
                run(asyncio.sleep(0.1))  # the store's loop sees its connections closed
                assert _paid_call(store, run, f"c{i}", 10)
            assert run(store.wallet("t1")).balance_units == 1_000 - 30
        finally:
            run(store.close())
