"""A fault on one master of a Redis Cluster stays on that master's tenants.

A master that stalls (SIGSTOP) fails the calls routed to it within the store's timeout, and no
other: calls on other masters neither queue behind it nor wait for a map refresh that asks it
first. A master that loses its replica takes money writes on its own AOF and says durability
is reduced, naming itself. A finisher step that keeps failing on one master does not hold back
the releases of tenants on another.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.admission.finisher import CallFinisher
from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome, ApiKeyRecord, TaskCreateOutcome
from gateway.store.health import StoreHealth
from gateway.store.key_tags import tenant_tag
from gateway.store.redis import RedisStore, tenants
from tests.store.listing_support import make_task, task_create
from tests.store.support import Run, admission, release, settlement
from tests.support.redis_cluster import ClusterNode, LocalCluster, cluster_binaries
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until, wait_until_async

pytestmark = STORE_FAULTS


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    binary, cli = cluster_binaries()
    # No failover while a master is paused here: its pause outlasts no node timeout.
    with LocalCluster.running(
        binary, cli, tmp_path / "cluster", node_timeout_ms=30_000, durable=True
    ) as running:
        # Setup writes wait for a replica starved by a busy machine up to 2 s rather than
        # 250 ms: these tests check which calls a fault reaches, not a replica's speed.
        running.url_options = "?wait_ms=2000"
        yield running


def _tenant_on(cluster: LocalCluster, store: RedisStore, master: ClusterNode, name: str) -> str:
    """A tenant whose data live on `master`."""
    for i in itertools.count():
        tenant = f"{name}{i}"
        if cluster.master_of(store.keys.wallet(tenant)).port == master.port:
            return tenant
    raise AssertionError("unreachable")


def _first_and_other(cluster: LocalCluster) -> tuple[ClusterNode, ClusterNode]:
    """The master a map refresh asks first (the lowest address), and another."""
    first, other, *_ = sorted(cluster.masters(), key=lambda node: node.port)
    return first, other


def _pause(node: ClusterNode) -> None:
    assert node.process is not None
    os.kill(node.process.pid, signal.SIGSTOP)


def _resume(node: ClusterNode) -> None:
    assert node.process is not None
    os.kill(node.process.pid, signal.SIGCONT)


def test_a_paused_master_stalls_no_call_on_another(cluster: LocalCluster, run: Run) -> None:
    store = RedisStore(cluster.url, prefix="pz:", socket_timeout=4.0)
    paused, other = _first_and_other(cluster)
    stalled, served = (
        _tenant_on(cluster, store, paused, "a"),
        _tenant_on(cluster, store, other, "b"),
    )

    async def scenario() -> None:
        for tenant in (stalled, served):  # the map, and a connection to each master
            await store.admit(admission(f"warm-{tenant}", tenant=tenant, rpm=0))
        _pause(paused)
        try:
            for round_ in range(2):
                # A call to the paused master waits for its watchdog (4 s); meanwhile calls
                # on the other master are answered, also once a failure made the map stale.
                waiting = asyncio.ensure_future(
                    store.admit(admission(f"s{round_}", tenant=stalled, rpm=0))
                )
                await asyncio.sleep(0.3)  # (longer than the gap between two map refreshes)
                for i in range(10):
                    adm = admission(f"c{round_}-{i}", tenant=served, rpm=0)
                    assert (await store.admit(adm)).outcome is AdmissionOutcome.ADMITTED
                    await store.settle(settlement(adm, charge=0))
                assert not waiting.done()
                with pytest.raises(StoreUnavailable):
                    await waiting
        finally:
            _resume(paused)

    run(store.open())
    try:
        run(scenario())
    finally:
        run(store.close())


def test_a_master_without_its_replica_takes_money_and_names_itself(
    cluster: LocalCluster, run: Run
) -> None:
    store = RedisStore(cluster.url, prefix="nr:")
    lonely, _ = _first_and_other(cluster)
    tenant = _tenant_on(cluster, store, lonely, "a")
    run(store.open())
    try:
        run(store.grant(tenant, 1_000_000, entry_id="g0", reason="start"))
        states = {s.shard: s for s in run(store.durability(1.0))}
        assert len(states) == 3 and not any(s.reduced for s in states.values())
        cluster.kill(cluster.replica_of(lonely))
        tries = itertools.count()

        def paid_call() -> bool:
            adm = admission(f"w{next(tries)}", tenant=tenant, hold=1, rpm=0)
            try:
                run(store.admit(adm))
                run(store.settle(settlement(adm, charge=1)))
            except StoreUnavailable:
                return False
            return True

        # Writes counting on the replica as it went may fail (unknown outcomes); then none.
        wait_until(paid_call, timeout=15, interval=0.05, what="a paid call without a replica")
        assert all(paid_call() for _ in range(50))
        states = {s.shard: s for s in run(store.durability(1.0))}
        assert states[lonely.address].reduced and states[lonely.address].replicas == 0
        assert states[lonely.address].aof == "always"
        assert [s.shard for s in states.values() if s.reduced] == [lonely.address]
        health = StoreHealth(store, timeout=1.0)
        assert run(health.state()) == (True, (lonely.address,))
        entries = run(store.ledger(tenant, limit=1_000)).entries
        assert run(store.wallet(tenant)).balance_units == sum(e.amount_units for e in entries)
    finally:
        run(store.close())


def test_a_failing_master_holds_back_no_release_on_another(cluster: LocalCluster, run: Run) -> None:
    store = RedisStore(cluster.url, prefix="fr:", socket_timeout=1.0)
    paused, other = _first_and_other(cluster)
    stalled, served = (
        _tenant_on(cluster, store, paused, "a"),
        _tenant_on(cluster, store, other, "b"),
    )
    finisher = CallFinisher(store, retry_min=0.05, retry_max=0.2)

    async def held(tenant: str) -> int:
        return (await store.wallet(tenant)).held_units

    async def scenario() -> None:
        admitted = {}
        for tenant in (stalled, served):
            await store.grant(tenant, 1_000, entry_id="g0", reason="start")
            adm = admission(f"c-{tenant}", tenant=tenant, hold=100, rpm=0)
            assert (await store.admit(adm)).outcome is AdmissionOutcome.ADMITTED
            admitted[tenant] = adm
        assert await held(served) == 100
        _pause(paused)
        try:
            finisher.start()
            finisher.abandon(release(admitted[stalled]))  # queued first, and keeps failing
            finisher.abandon(release(admitted[served]))
            await wait_until_async(
                lambda: held(served), lambda units: units == 0, seconds=8, what="the release"
            )
            assert finisher.pending == 1  # the paused master's step, still queued
        finally:
            _resume(paused)
        await wait_until_async(lambda: finisher.pending, lambda n: n == 0, seconds=15, what="all")
        assert await held(stalled) == 0

    run(store.open())
    try:
        run(scenario())
    finally:
        run(finisher.close())
        run(store.close())


def test_a_dead_master_fails_no_key_lookup_or_task_read_on_another(
    cluster: LocalCluster, run: Run
) -> None:
    """Every call's reads (its key's record, by the secret's tag; a task) go to the master of
    the tenant's slot alone: while a dead master is still in the map, the calls routed to it
    fail and the others are answered, also when they are made at the same moments."""
    store = RedisStore(cluster.url, prefix="dk:", socket_timeout=2.0)
    dead, other = _first_and_other(cluster)
    gone, served = _tenant_on(cluster, store, dead, "a"), _tenant_on(cluster, store, other, "b")
    tags = {tenant: tenant_tag(tenant) for tenant in (gone, served)}

    async def scenario() -> None:
        for tenant in (gone, served):
            record = ApiKeyRecord(key_id=f"key-{tenant}", tenant=tenant, created_at=1.0)
            await store.create_key(record, f"hash-{tenant}")
            await store.get_key(f"hash-{tenant}", tags[tenant])  # the map, and a connection
        cluster.kill(dead)  # no failover: the node timeout outlasts the test
        for round_ in range(20):
            calls = [store.get_key(f"hash-{t}", tags[t]) for t in (gone, served) * 3]
            calls += [store.get_task(t, f"task-{round_}") for t in (gone, served)]
            answers = await asyncio.gather(*calls, return_exceptions=True)
            keys, tasks = answers[:6], answers[6:]
            assert all(isinstance(a, StoreUnavailable) for a in (*keys[0::2], tasks[0]))
            assert all(isinstance(a, ApiKeyRecord) and a.tenant == served for a in keys[1::2])
            assert tasks[1] is None

    run(store.open())
    try:
        run(scenario())
    finally:
        run(store.close())


def test_a_registry_on_a_paused_master_fails_no_create_of_a_registered_tenant(
    cluster: LocalCluster, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant's entry in the registry of tenants with tasks lives on its queue shard's master,
    which may be another than the tenant's: once registered, a create whose refresh of that
    entry cannot be answered is created all the same (the registry keeps the tenant)."""
    monkeypatch.setattr(tenants, "REGISTER_EVERY", 0.0)  # every create refreshes its entry
    store = RedisStore(cluster.url, prefix="rg:", socket_timeout=1.0)
    k = store.keys
    for i in itertools.count():
        tenant = f"r{i}"
        own = cluster.master_of(k.wallet(tenant))
        registry = cluster.master_of(k.shard_tenants(k.shard_of(tenant)))
        if own.port != registry.port:
            break

    async def scenario() -> None:
        first = await make_task(store, "t-0", tenant=tenant)
        assert first.status == "queued"
        _pause(registry)
        try:
            created = await store.create_task(task_create("t-1", tenant, "text_to_image"))
        finally:
            _resume(registry)
        assert created.outcome is TaskCreateOutcome.CREATED

    run(store.open())
    try:
        run(scenario())
    finally:
        run(store.close())
