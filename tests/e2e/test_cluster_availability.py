"""A Redis Cluster that loses a node keeps serving: availability through each kind of fault,
with the books exact afterwards.

A cluster of 3 masters with a replica each, set as docs/deploy.md tells (`cluster-node-timeout
2000`, `cluster-require-full-coverage no`, `appendonly yes`, `appendfsync always`; the store URL
with `wait_replicas=1`, `wait_ms=250`: `WAIT_OPTIONS`), one `gateway serve --processes 2`, and
two tenants under a steady mix of chats and image and music creates
(tests/e2e/availability_load.py): `near`, whose slot is on the master the fault hits (chosen by
its hash slot), and `far`, whose slot is on another master and whose API key's record is on the
faulty one whenever the key layout puts it there (the hardest case for it). The faults:

- a master killed (`kill -9`) and left dead `DOWN_SECONDS`, then started again;
- that master's replica killed and left dead as long, then started again;
- that master paused (SIGSTOP) `STALL_SECONDS`, longer than the node timeout, then continued.

Each test prints, per tenant and per phase (before, during the election, after the promotion,
after the node's return), the share of successes and p50/p99 latency, and asserts: `far` had no
error at any time; `near` had at least 99 % successes from `SETTLE_SECONDS` after the promotion
(or after the replica's loss) until the node's return, and again after its return; `/v1/health`
said meanwhile that near's master writes money with less durability than asked (no replica to
wait for); every 2xx charged exactly once, nothing charged behind a retryable failure, every
wallet equal to its ledger, nothing held. Latency is recorded, not asserted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.auth.keys import hash_api_key
from gateway.store.redis.keys import RedisKeys
from tests.e2e.availability_load import Run, Timeline, check_tenant_books, run_fault
from tests.support.gateway_process import GatewayProcess
from tests.support.process_group import serving_pids, start_processes
from tests.support.redis_cluster import ClusterNode, LocalCluster, cluster_binaries
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until

pytestmark = STORE_FAULTS

NODE_TIMEOUT_MS = 2000
DOWN_SECONDS = 20.0
"""How long a killed node stays dead before it is started again."""
STALL_SECONDS = 5.0
"""How long a paused master stays paused: longer than the node timeout, so it is failed over."""
SETTLE_SECONDS = 3.0
"""After a promotion, a replica's loss or a node's return: the gateway's time to see it."""
STEADY_SECONDS = 4.0
"""Load before the fault, and after the cluster is whole again."""
GOAL = 0.99
WAIT_OPTIONS = "?wait_replicas=1&wait_ms=250"
"""The store URL's, as docs/deploy.md's recipe (the defaults on a cluster, said out loud)."""


@dataclass
class Scene:
    cluster: LocalCluster
    gateway: GatewayProcess
    victim: ClusterNode
    """The master of `near`'s slot, which the fault hits."""
    keys: dict[str, str]  # tenant -> API key


def _tenants(cluster: LocalCluster) -> tuple[str, str, ClusterNode]:
    """`near` and `far` names whose slots are on two different masters, and near's master."""
    keys = RedisKeys("gw:")
    candidates = [f"tenant-{i}" for i in range(64)]
    near = candidates[0]
    victim = cluster.master_of(keys.wallet(near))
    far = next(t for t in candidates if cluster.master_of(keys.wallet(t)) is not victim)
    return near, far, victim


def _node_holding(cluster: LocalCluster, fragment: str) -> ClusterNode | None:
    """The master that has a key whose name contains `fragment`."""
    for node in cluster.masters():
        with node.client() as client:
            if next(iter(client.scan_iter(match=f"*{fragment}*", count=1000)), None):
                return node
    return None


def _key_on(gateway: GatewayProcess, cluster: LocalCluster, tenant: str, node: ClusterNode) -> str:
    """A key of `tenant` whose record is on `node` if the layout puts records there: up to 30
    tries while records land anywhere (a third on each master), and none once three in a row
    are in the tenant's own slot's master (records that follow their tenant)."""
    home = cluster.master_of(RedisKeys("gw:").wallet(tenant))
    at_home = 0
    for _ in range(30):
        key = gateway.new_key(tenant)
        holder = _node_holding(cluster, hash_api_key(key))
        at_home = at_home + 1 if holder is home else 0
        if holder in (node, None) or at_home == 3:  # None: the record is not named by its hash
            break
    return key


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    binary, cli = cluster_binaries()
    with LocalCluster.running(
        binary,
        cli,
        tmp_path / "cluster",
        node_timeout_ms=NODE_TIMEOUT_MS,
        durable=True,
        full_coverage=False,
    ) as cluster:
        cluster.url_options = WAIT_OPTIONS
        near, far, victim = _tenants(cluster)
        config = f"{MEDIA_CONFIG}\n[tenants.{near}]\n[tenants.{far}]\n"
        gateway = start_processes(tmp_path / "gw", config, cluster.url, processes=2)
        try:
            assert len(serving_pids(gateway)) == 2
            keys = {near: gateway.new_key(near), far: _key_on(gateway, cluster, far, victim)}
            for tenant in keys:
                gateway.grant(tenant, "100000")
            yield Scene(cluster, gateway, victim, keys)
        finally:
            gateway.stop()


def _run(scene: Scene, name: str, fault: Callable[[Timeline], None]) -> Run:
    """The load over `fault`, which marks its phases; then the cluster made whole again."""
    near, far = scene.keys

    def whole(timeline: Timeline) -> None:
        fault(timeline)
        scene.cluster.wait_healthy()

    title = f"{name} (near: {near}, far: {far})"
    return run_fault(scene.gateway, scene.keys, title, whole, steady_seconds=STEADY_SECONDS)


def _check(run: Run, served_from: str | None) -> None:
    """The books of every tenant; then `far` never failed, and `near` reached the goal from
    `SETTLE_SECONDS` after `served_from` (a phase) until the return, and after the return."""
    for load in run.loads:
        check_tenant_books(load.gateway, load)
    near, far = (load.tenant for load in run.loads)
    returned = run.timeline.at("returned")
    problems = []
    if far_errors := run.errors(far):
        problems.append(f"far: {len(far_errors)} errors, first {far_errors[:2]}")
    windows = [(f"after {served_from}", served_from, returned)] if served_from else []
    windows.append(("after the return", "returned", run.end))
    for what, since, until in windows:
        share, count = run.share(near, run.timeline.at(since) + SETTLE_SECONDS, until)
        if not count or share < GOAL:
            problems.append(f"near: {share:.1%} of {count} calls {what}")
    if served_from and not reported_reduced(run, served_from):
        problems.append(f"/v1/health never said durability_reduced after {served_from}")
    assert not problems, "\n".join([*problems, run.table()])


def reported_reduced(run: Run, phase: str) -> bool:
    """Whether `/v1/health` said a shard's durability was reduced during `phase` (its master
    without the replica its money writes wait for)."""
    said = run.health.said(*run.timeline.span(phase, run.end))
    return any(s.startswith("durability_reduced") for s in said)


def _promoted(cluster: LocalCluster, replica: ClusterNode) -> Callable[[], bool]:
    return lambda: cluster.role(replica) == "master"


def test_a_master_killed_and_left_dead_costs_its_tenants_the_election_only(scene: Scene) -> None:
    cluster, victim = scene.cluster, scene.victim
    replica = cluster.replica_of(victim)

    def fault(timeline: Timeline) -> None:
        killed = timeline.mark("election")
        cluster.kill(victim)
        wait_until(_promoted(cluster, replica), timeout=30, what="the replica's promotion")
        timeline.mark("promoted")
        time.sleep(max(0.0, killed + DOWN_SECONDS - time.monotonic()))
        timeline.mark("returned")
        cluster.restart(victim)  # back as the new master's replica

    _check(_run(scene, "master killed", fault), "promoted")


def test_a_replica_killed_and_left_dead_keeps_its_master_serving(scene: Scene) -> None:
    cluster = scene.cluster
    replica = cluster.replica_of(scene.victim)

    def fault(timeline: Timeline) -> None:
        timeline.mark("replica down")
        cluster.kill(replica)
        time.sleep(DOWN_SECONDS)
        timeline.mark("returned")
        cluster.restart(replica)

    _check(_run(scene, "replica killed", fault), "replica down")


def test_a_master_paused_past_the_node_timeout_stalls_no_other_master(scene: Scene) -> None:
    cluster, victim = scene.cluster, scene.victim
    replica = cluster.replica_of(victim)

    def fault(timeline: Timeline) -> None:
        paused = timeline.mark("election")
        cluster.pause(victim)
        try:
            wait_until(_promoted(cluster, replica), timeout=30, what="the replica's promotion")
            timeline.mark("promoted")
            time.sleep(max(0.0, paused + STALL_SECONDS - time.monotonic()))
        finally:
            timeline.mark("returned")
            cluster.resume(victim)  # finds its slots taken over: becomes a replica

    _check(_run(scene, "master paused", fault), None)
