"""A Redis Cluster master killed under load: two gateways on a cluster of their own (3 masters,
3 replicas), one of them `serve --processes 2`, serve a steady stream of chat calls and image
tasks; the master that holds the tenant's slot gets `kill -9`, the cluster promotes its
replica, and the killed node comes back as the new master's replica. What must hold of the
answers: `tests/e2e/failover_load.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.store.redis.keys import RedisKeys
from tests.e2e.failover_load import Load, check_books
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.process_group import serving_pids, start_processes
from tests.support.redis_cluster import LocalCluster, cluster_binaries
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until

pytestmark = STORE_FAULTS


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    binary, cli = cluster_binaries()
    with LocalCluster.running(binary, cli, tmp_path / "cluster") as running:
        yield running


@pytest.fixture
def gateways(cluster: LocalCluster, tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    started: list[GatewayProcess] = []
    try:
        started.append(start_gateway(tmp_path / "a", MEDIA_CONFIG, store_url=cluster.url))
        started.append(start_processes(tmp_path / "b", MEDIA_CONFIG, cluster.url, processes=2))
        yield started
    finally:
        for gateway in started:
            gateway.stop()


def test_a_killed_master_loses_no_money_and_no_task(
    cluster: LocalCluster, gateways: list[GatewayProcess]
) -> None:
    a, b = gateways
    assert len(serving_pids(b)) == 2
    key = a.new_key("default")
    a.grant("default", "100000")
    load = Load(gateways, key, "fo")
    load.start()
    try:
        load.wait_for(40, "load before the kill")
        master = cluster.master_of(RedisKeys("gw:").wallet("default"))
        cluster.kill(master)
        wait_until(
            lambda: len(cluster.masters()) == 3 and master not in cluster.masters(),
            timeout=30,
            what="a replica to take over",
        )
        cluster.restart(master)  # back as the new master's replica
        cluster.wait_healthy()
        load.wait_for(40, "load after")
    finally:
        load.finish()

    refused = check_books(a, key, load.answers)
    # The window was met: for at least the cluster's node timeout (1 s) every call on the
    # tenant's slot failed, and the loops call without a pause but after a 503.
    assert refused
