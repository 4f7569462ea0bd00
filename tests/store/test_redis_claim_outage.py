"""A claim whose replica does not acknowledge it costs the task no attempt: during a replica's
outage every claim runs on the primary and fails its WAIT, and before the claim was taken back
each one counted, so a queued, paid task ended `worker_lost` (refunded, never run) after
`max_attempts` leases. On a real primary and replica, the replica paused (SIGSTOP)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.errors import StoreUnavailable
from gateway.store.redis import RedisStore
from tests.store.support import Run
from tests.store.task_support import SHORT, balanced, create, lapse, made
from tests.support.redis_replicated import ReplicatedRedis


@pytest.fixture
def pair(redis_binary: str, tmp_path: Path) -> Iterator[ReplicatedRedis]:
    with ReplicatedRedis.running(redis_binary, tmp_path) as replicated:
        yield replicated


@pytest.fixture
def store(pair: ReplicatedRedis, run: Run) -> Iterator[RedisStore]:
    opened = RedisStore(pair.url(), prefix="gw:")
    run(opened.open())
    try:
        yield opened
    finally:
        run(opened.close())


def test_claims_during_a_replica_outage_burn_no_attempt(
    pair: ReplicatedRedis, store: RedisStore, run: Run
) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    made(store, run, create("task_a", price=250))
    pair.pause_replica()
    for _ in range(4):  # more claims than attempts, each past the last one's lease
        with pytest.raises(StoreUnavailable):
            run(store.claim_task("w1", lease_seconds=SHORT, max_attempts=3))
        queued = run(store.get_task("t1", "task_a"))
        assert queued is not None
        assert (queued.status, queued.attempts, queued.worker_id) == ("queued", 0, None)
        assert queued.started_at is None
        lapse()
    pair.resume_replica()

    task = run(store.claim_task("w2", lease_seconds=SHORT, max_attempts=3))
    assert task is not None and task.task_id == "task_a"
    assert (task.status, task.attempts, task.worker_id) == ("running", 1, "w2")
    assert balanced(store, run) == 750  # debited once, nothing refunded
    assert run(store.task_queue_depth()) == 0
