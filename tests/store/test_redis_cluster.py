"""The store on a Redis Cluster of its own: the pipelined client follows a slot that moves (ASK
while it migrates, MOVED after), and a master killed with `kill -9` costs only retryable
failures while its replica takes over; after, every answered write is there and wallet =
ledger."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome
from gateway.store.redis import RedisStore
from gateway.store.redis.cluster_pipeline import ClusterScriptPipeline
from gateway.store.redis.pipeline import LuaScript, ScriptPipeline
from tests.store.support import Run, admission, settlement
from tests.support.redis_cluster import ClusterNode, LocalCluster, cluster_binaries
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until

_SET = LuaScript.of(
    f"-- {uuid.uuid4().hex}\nredis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])"
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    binary, cli = cluster_binaries()
    with LocalCluster.running(binary, cli, tmp_path / "cluster") as running:
        yield running


def _node_id(node: ClusterNode) -> str:
    with node.client() as client:
        return str(client.execute_command("CLUSTER", "MYID").decode())


def _pipeline(cluster: LocalCluster) -> ClusterScriptPipeline:
    def link(address: tuple[str, int]) -> ScriptPipeline:
        return ScriptPipeline(
            f"redis://{address[0]}:{address[1]}/0", socket_timeout=2.0, connect_timeout=1.0
        )

    first = cluster.nodes[0]
    return ClusterScriptPipeline([("127.0.0.1", first.port)], link, socket_timeout=2.0)


def test_a_slot_that_moves_is_followed_by_ask_then_moved(cluster: LocalCluster, run: Run) -> None:
    here, there_key = "{mig}here", "{mig}there"
    source = cluster.master_of(here)
    target = next(m for m in cluster.masters() if m is not source)
    with source.client() as client:
        slot = int(client.execute_command("CLUSTER", "KEYSLOT", here))
    pipe = _pipeline(cluster)

    async def before() -> None:
        assert await pipe.evalsha(_SET, [here], ["v1"]) == b"v1"

    run(before())
    with source.client() as src, target.client() as dst:  # the slot starts to migrate
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", _node_id(source))
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", _node_id(target))

    async def during() -> None:
        # A key the source no longer has: it answers ASK, the call goes once to the target.
        assert await pipe.evalsha(_SET, [there_key], ["v2"]) == b"v2"
        assert await pipe.evalsha(_SET, [here], ["v3"]) == b"v3"  # still on the source

    run(during())
    with source.client() as src, target.client() as dst:  # the slot moves
        src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", here)
        for node in (dst, src):
            node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", _node_id(target))

    async def after() -> None:
        assert await pipe.evalsha(_SET, [here], ["v4"]) == b"v4"  # MOVED, then the target
        assert await pipe.masters()  # the map was asked again
        assert pipe._slots[slot] == ("127.0.0.1", target.port)
        await pipe.close()

    run(after())
    with redis.RedisCluster(host="127.0.0.1", port=target.port) as client:
        assert client.mget([here, there_key]) == [b"v4", b"v2"]


@STORE_FAULTS
def test_a_killed_master_costs_only_retryable_failures_and_loses_no_answer(
    cluster: LocalCluster, run: Run
) -> None:
    store = RedisStore(cluster.url, prefix="fo:")
    tenant = "t1"
    answered: list[str] = []  # calls whose settle was answered
    unknown: list[str] = []  # calls whose settle failed: it may or may not have run
    refused = 0  # admissions that failed: nothing was taken

    async def load(stop: asyncio.Event) -> None:
        nonlocal refused
        i = 0
        while not stop.is_set():
            i += 1
            adm = admission(f"c{i}", tenant=tenant, hold=1, rpm=0)
            try:
                outcome = (await store.admit(adm)).outcome
            except StoreUnavailable:
                refused += 1
                await asyncio.sleep(0.02)
                continue
            assert outcome is AdmissionOutcome.ADMITTED
            try:
                await store.settle(settlement(adm, charge=1))
                answered.append(adm.call.request_id)
            except StoreUnavailable:
                unknown.append(adm.call.request_id)
                await asyncio.sleep(0.02)

    async def grant_once_acknowledged() -> None:
        """The setup's grant, retried as a client would (one entry id: applied once). On a
        loaded machine a replica can take longer than the 250 ms a money write waits for it,
        and the write answers StoreUnavailable (seen with the suite held to 0.65 of a core)."""
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            try:
                await store.grant(tenant, 1_000_000, entry_id="g0", reason="start")
                return
            except StoreUnavailable:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.1)

    async def scenario() -> None:
        await store.open()
        await grant_once_acknowledged()
        stop = asyncio.Event()
        running = asyncio.ensure_future(load(stop))
        await asyncio.sleep(1.0)
        master = cluster.master_of(store.keys.wallet(tenant))
        await asyncio.to_thread(cluster.kill, master)
        # Calls fail (retryable) until its replica takes over; then money writes wait for a
        # replica the new master does not have: the killed node comes back as one.
        await asyncio.to_thread(
            wait_until,
            lambda: len(cluster.masters()) == 3 and master not in cluster.masters(),
            timeout=30,
            what="a replica to take over",
        )
        await asyncio.to_thread(cluster.restart, master)
        await asyncio.to_thread(cluster.wait_healthy)
        served = len(answered)
        await asyncio.to_thread(
            wait_until, lambda: len(answered) >= served + 50, timeout=30, what="calls after"
        )
        stop.set()
        await running

    try:
        run(scenario())
        assert refused + len(unknown) > 0  # the window was met
        entries = run(store.ledger(tenant, limit=10_000)).entries
        charged = {e.request_id for e in entries if e.kind == "charge"}
        # Every answered charge is there: the failover lost none. A charge that is there was
        # answered, or its settle's outcome was unknown (the caller retries that one).
        assert set(answered) <= charged <= set(answered) | set(unknown)
        wallet = run(store.wallet(tenant))
        assert wallet.balance_units == sum(e.amount_units for e in entries)
    finally:
        run(store.close())
