"""Money writes wait for the replicas their primary has, on a connection of their own.

A primary without replicas answers money writes on its own AOF and says durability is reduced;
a replica that stops acknowledging (paused) makes the writes already waiting an unknown outcome
(`ReplicationTimeout`), is counted out within a few seconds and back in once it acknowledges
again; and a money write waiting for a replica holds back no other call on that primary.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome, ShardDurability
from gateway.store.redis import RedisStore
from gateway.store.redis.pipeline import ReplicationTimeout
from tests.store.support import Run, admission
from tests.support.redis_server import RedisServer
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until


class _Pair:
    """A primary (`appendfsync always`) and its replica, private to a test."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.primary = RedisServer(binary, workdir / "primary", durable=True)
        self.replica = RedisServer(binary, workdir / "replica", durable=True)

    def start(self) -> None:
        for server in (self.primary, self.replica):
            server.workdir.mkdir(parents=True)
            server.start()
        with redis.Redis(port=self.replica.port) as client:
            client.replicaof("127.0.0.1", self.primary.port)
        wait_until(self.replicated, timeout=30, what="the replica online")

    def replicated(self) -> bool:
        with redis.Redis(port=self.primary.port) as client:
            info = client.info("replication")
        slave = info.get("slave0")
        return isinstance(slave, dict) and slave.get("state") == "online"

    def waits(self) -> int:
        """WAITs the primary has run."""
        with redis.Redis(port=self.primary.port) as client:
            stats = client.info("commandstats")
        return int(stats.get("cmdstat_wait", {}).get("calls", 0))

    def pause_replica(self) -> None:
        assert self.replica.process is not None
        os.kill(self.replica.process.pid, signal.SIGSTOP)

    def resume_replica(self) -> None:
        assert self.replica.process is not None
        os.kill(self.replica.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        self.resume_replica()
        self.replica.stop()
        self.primary.stop()


@pytest.fixture
def pair(redis_binary: str, tmp_path: Path) -> Iterator[_Pair]:
    running = _Pair(redis_binary, tmp_path)
    try:
        running.start()
        yield running
    finally:
        running.stop()


def _store(url: str, wait_ms: int, *, socket_timeout: float = 2.0) -> RedisStore:
    return RedisStore(f"{url}?wait_replicas=1&wait_ms={wait_ms}", socket_timeout=socket_timeout)


def test_a_primary_without_a_replica_takes_money_writes_on_its_aof_and_says_so(
    redis_binary: str, tmp_path: Path, run: Run
) -> None:
    server = RedisServer(redis_binary, tmp_path, durable=True)
    server.start()
    store = _store(server.url, 50)
    run(store.open())
    try:
        # Waiting for a replica that is not there would fail every money write for as long.
        assert run(store.grant("t1", 100, entry_id="g1", reason="x")).amount_units == 100
        assert run(store.wallet("t1")).balance_units == 100
        assert run(store.durability(1.0)) == [
            ShardDurability(shard=f"127.0.0.1:{server.port}", replicas=0, wanted=1, aof="always")
        ]
        assert run(store.durability(1.0))[0].reduced
        assert run(store.ping())
    finally:
        run(store.close())
        server.stop()


@STORE_FAULTS
def test_a_paused_replica_is_counted_out_then_back_in(pair: _Pair, run: Run) -> None:
    store = _store(pair.primary.url, 200)
    run(store.open())
    try:
        before = pair.waits()
        assert run(store.grant("t1", 1, entry_id="g0", reason="x")).amount_units == 1
        assert pair.waits() > before  # a replica keeps up: the write waited for it
        (state,) = run(store.durability(1.0))
        assert (state.replicas, state.reduced, state.aof) == (1, False, "always")
        pair.pause_replica()
        # Writes already counting on it fail as unknown outcomes (they ran; a retry of the
        # idempotent step applies them once); within a few seconds it is no longer waited for.
        unknown = 0

        def granted() -> bool:
            nonlocal unknown
            try:
                run(store.grant("t1", 10, entry_id="g1", reason="x"))
            except StoreUnavailable as exc:
                assert isinstance(exc.__cause__, ReplicationTimeout)
                unknown += 1
                return False
            return True

        wait_until(granted, timeout=15, interval=0.05, what="a write that does not wait")
        (state,) = run(store.durability(1.0))
        assert (state.replicas, state.reduced) == (0, True)
        assert run(store.wallet("t1")).balance_units == 11  # g1 once, however often tried
        pair.resume_replica()

        def restored() -> bool:
            return not run(store.durability(1.0))[0].reduced

        wait_until(restored, timeout=15, interval=0.1, what="the replica counted back in")
        before = pair.waits()
        assert run(store.grant("t1", 1, entry_id="g2", reason="x")).amount_units == 1
        assert pair.waits() > before
    finally:
        run(store.close())


@STORE_FAULTS
def test_a_write_waiting_for_its_replica_holds_back_no_admission(pair: _Pair, run: Run) -> None:
    store = _store(pair.primary.url, 4_000, socket_timeout=8.0)

    async def scenario() -> None:
        await store.grant("t1", 1_000, entry_id="g0", reason="x")  # counts the replica: 1
        pair.pause_replica()
        grant = asyncio.ensure_future(store.grant("t1", 10, entry_id="g1", reason="x"))
        await asyncio.sleep(0.1)  # its WAIT is with the primary now, for 4 s
        for i in range(20):
            result = await store.admit(admission(f"c{i}", tenant="t1"))
            assert result.outcome is AdmissionOutcome.ADMITTED
        assert not grant.done()  # the admissions did not queue behind its WAIT
        with pytest.raises(StoreUnavailable):
            await grant

    run(store.open())
    try:
        run(scenario())
    finally:
        run(store.close())
