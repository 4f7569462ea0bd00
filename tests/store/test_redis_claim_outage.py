"""A claim whose replicas do not acknowledge it (it ran on the primary, its WAIT failed) is
taken back and costs the task no attempt; counted, every claim during a replica's outage would
fail so, and a queued, paid task end `worker_lost` (refunded, never run) after `max_attempts`
leases.

On a real primary and replica, the replica paused (SIGSTOP: its first missed write is an
unknown outcome, whatever the store then makes of the replica); and, for claims that keep
failing so, on one Redis with the store's durable calls failing after they ran, as an
unacknowledged WAIT fails them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import StoreUnavailable
from gateway.store.redis import RedisStore
from gateway.store.redis.pipeline import ReplicationTimeout
from tests.store.conftest import CALL_BOUND_SECONDS
from tests.store.support import Run
from tests.store.task_support import SHORT, balanced, create, lapse, made
from tests.support.redis_replicated import ReplicatedRedis
from tests.support.serial import STORE_FAULTS


class _Unacknowledged(RedisStore):
    """A store whose next `failing` claims run, then fail as a WAIT no replica answered."""

    failing = 0

    async def _eval_hot(
        self, name: str, keys: Sequence[str], args: Sequence[Any], *, durable: bool = False
    ) -> Any:
        result = await super()._eval_hot(name, keys, args, durable=durable)
        if name == "task_claim" and self.failing > 0:
            self.failing -= 1
            raise StoreUnavailable() from ReplicationTimeout("0 of 1 replicas acknowledged")
        return result


@pytest.fixture
def pair(redis_binary: str, tmp_path: Path) -> Iterator[ReplicatedRedis]:
    with ReplicatedRedis.running(redis_binary, tmp_path) as replicated:
        yield replicated


@STORE_FAULTS
def test_a_claim_the_paused_replica_misses_is_taken_back(pair: ReplicatedRedis, run: Run) -> None:
    store, other = RedisStore(pair.url()), RedisStore(pair.url())
    run(store.open())
    run(other.open())
    try:
        run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
        made(store, run, create("task_a", price=250))
        pair.pause_replica()
        with pytest.raises(StoreUnavailable) as caught:
            run(store.claim_task("w1", lease_seconds=SHORT, max_attempts=3))
        assert isinstance(caught.value.__cause__, ReplicationTimeout)
        queued = run(store.get_task("t1", "task_a"))
        assert queued is not None
        assert (queued.status, queued.attempts, queued.worker_id) == ("queued", 0, None)
        assert queued.started_at is None
        pair.resume_replica()

        task = run(other.claim_task("w2", lease_seconds=SHORT))  # at once: no lease to wait out
        assert task is not None and task.task_id == "task_a"
        assert (task.status, task.attempts, task.worker_id) == ("running", 1, "w2")
        assert balanced(store, run) == 750  # debited once, nothing refunded
    finally:
        run(store.close())
        run(other.close())


def test_claims_that_keep_failing_their_wait_burn_no_attempt(
    redis_url: str, redis_prefix: str, run: Run
) -> None:
    store = _Unacknowledged(redis_url, prefix=redis_prefix, socket_timeout=CALL_BOUND_SECONDS)
    run(store.open())
    try:
        run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
        made(store, run, create("task_a", price=250))
        store.failing = 4
        for _ in range(4):  # more claims than attempts, each past the last one's lease
            with pytest.raises(StoreUnavailable):
                run(store.claim_task("w1", lease_seconds=SHORT, max_attempts=3))
            queued = run(store.get_task("t1", "task_a"))
            assert queued is not None and (queued.status, queued.attempts) == ("queued", 0)
            lapse()

        task = run(store.claim_task("w1", lease_seconds=SHORT, max_attempts=3))
        assert task is not None and (task.task_id, task.attempts) == ("task_a", 1)
        assert balanced(store, run) == 750
        assert run(store.task_queue_depth()) == 0
    finally:
        run(store.close())
