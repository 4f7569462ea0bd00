"""The SQLite store's chat paths on its injected clock: time moves, nothing sleeps.

Holds, in-flight leases, rate buckets, stored replies, fences and the memory sweep all end by
time; each test moves the clock to just before and just at the end and looks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.store.base import AdmissionOutcome, StoredReply
from gateway.store.sqlite import SqliteStore
from gateway.store.sqlite.memory import FENCE_SECONDS
from tests.store.support import Run, admission, claim, release, settlement
from tests.support.clock import Clock

ADMITTED = AdmissionOutcome.ADMITTED
REPLY = StoredReply(status=200, content_type="application/json", body=b'{"id":"x"}')


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, run: Run, clock: Clock) -> Iterator[SqliteStore]:
    sqlite_store = SqliteStore(tmp_path / "g.db", clock=clock, sweep_seconds=10.0)
    run(sqlite_store.open())
    run(sqlite_store.grant("t1", 100, entry_id="g1", reason="top-up"))
    yield sqlite_store
    run(sqlite_store.close())


def test_a_hold_expires_when_the_clock_passes_hold_seconds(
    store: SqliteStore, run: Run, clock: Clock
) -> None:
    assert run(store.admit(admission("lost", hold=100, hold_seconds=30))).outcome is ADMITTED
    clock.advance(29)
    assert run(store.wallet("t1")).held_units == 100
    refused = run(store.admit(admission("c2", hold=1)))
    assert refused.outcome is AdmissionOutcome.INSUFFICIENT_CREDITS
    clock.advance(1)
    assert run(store.wallet("t1")).held_units == 0
    again = run(store.admit(admission("c3", hold=100)))
    assert again.outcome is ADMITTED and again.available_units == 100


def test_an_in_flight_lease_expires_with_the_clock(
    store: SqliteStore, run: Run, clock: Clock
) -> None:
    assert run(store.admit(admission("c1", idempotency=claim(lease_seconds=60)))).outcome is (
        ADMITTED
    )
    clock.advance(59)
    assert run(store.admit(admission("c2", idempotency=claim()))).outcome is (
        AdmissionOutcome.IN_PROGRESS
    )
    clock.advance(1)
    assert run(store.admit(admission("c3", idempotency=claim()))).outcome is ADMITTED


def test_rate_buckets_refill_with_the_clock(store: SqliteStore, run: Run, clock: Clock) -> None:
    for call_id in ("c1", "c2"):
        assert run(store.admit(admission(call_id, rpm=2))).outcome is ADMITTED
    limited = run(store.admit(admission("c3", rpm=2)))
    assert limited.outcome is AdmissionOutcome.RATE_LIMITED
    assert limited.rate.retry_after_seconds == pytest.approx(30.0)
    assert limited.rate.reset_requests_seconds == pytest.approx(60.0)
    clock.advance(29.9)
    assert run(store.admit(admission("c4", rpm=2))).outcome is AdmissionOutcome.RATE_LIMITED
    clock.advance(0.1)
    admitted = run(store.admit(admission("c5", rpm=2)))
    assert admitted.outcome is ADMITTED and admitted.rate.remaining_requests == 0


def test_a_stored_reply_expires_with_the_clock(store: SqliteStore, run: Run, clock: Clock) -> None:
    done = admission("c1", idempotency=claim())
    run(store.admit(done))
    run(store.settle(settlement(done, reply=REPLY, reply_ttl_seconds=10)))
    clock.advance(9)
    replay = run(store.admit(admission("c2", idempotency=claim())))
    assert replay.outcome is AdmissionOutcome.REPLAY and replay.reply == REPLY
    clock.advance(1)
    assert run(store.admit(admission("c3", idempotency=claim()))).outcome is ADMITTED


def test_a_fence_lasts_its_time(store: SqliteStore, run: Run, clock: Clock) -> None:
    late = admission("late")
    run(store.release(release(late)))  # released before this process ever admitted it
    assert run(store.admit(late)).outcome is AdmissionOutcome.ABANDONED
    clock.advance(FENCE_SECONDS)
    assert run(store.admit(late)).outcome is ADMITTED


def test_the_memory_sweep_runs_on_the_clock(store: SqliteStore, run: Run, clock: Clock) -> None:
    lost = admission(
        "lost", rpm=600, tpm=60_000, tokens=10, hold=10, hold_seconds=5, idempotency=claim()
    )
    assert run(store.admit(lost)).outcome is ADMITTED
    before = {"buckets": 1, "holds": 1, "leases": 1, "calls": 1, "fenced": 0}
    assert store.memory_sizes() == before
    clock.advance(9)  # the hold expired, but no sweep is due yet (every 10 s)
    run(store.admit(admission("other", tenant="t2", api_key_id="k2", rpm=0)))
    assert store.memory_sizes() == before
    clock.advance(900)  # the lease and the call's marker expired too; the bucket is full
    run(store.admit(admission("sweeper", tenant="t2", api_key_id="k2", rpm=0)))
    assert store.memory_sizes() == {"buckets": 0, "holds": 0, "leases": 0, "calls": 0, "fenced": 0}
