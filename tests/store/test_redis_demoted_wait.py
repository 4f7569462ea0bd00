"""A primary demoted to a replica while a money write waits for its replica (a paused master
that comes back after its replica took over, or a manual `REPLICAOF`): Redis cuts the `WAIT`
short with an `UNBLOCKED` error. The write ran on a node that no longer leads, so its outcome is
unknown: `StoreUnavailable` (503, retryable), as for a `WAIT` that timed out, never a 500."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis

from gateway.errors import StoreUnavailable
from gateway.store.redis import RedisStore
from gateway.store.redis.pipeline import ReplicationTimeout
from tests.store.support import Run
from tests.support.redis_replicated import ReplicatedRedis
from tests.support.serial import STORE_FAULTS


@STORE_FAULTS
def test_a_primary_demoted_while_a_money_write_waits_is_an_unknown_outcome(
    redis_binary: str, tmp_path: Path, run: Run
) -> None:
    with ReplicatedRedis.running(redis_binary, tmp_path) as pair:
        store = RedisStore(pair.url(wait_ms=5_000))

        async def scenario() -> None:
            await store.grant("t1", 1, entry_id="g0", reason="x")  # counts the replica: 1
            pair.pause_replica()
            grant = asyncio.ensure_future(store.grant("t1", 10, entry_id="g1", reason="x"))
            await asyncio.sleep(0.3)  # its WAIT is with the primary now, for up to 5 s
            with redis.Redis(port=pair.primary.port) as client:
                client.replicaof("127.0.0.1", pair.replica.port)  # demoted
            with pytest.raises(StoreUnavailable) as refused:
                await grant
            assert isinstance(refused.value.__cause__, ReplicationTimeout)

        run(store.open())
        try:
            run(scenario())
        finally:
            run(store.close())
            pair.replica.resume()
