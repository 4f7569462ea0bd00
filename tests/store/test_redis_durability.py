"""Money writes wait for a replica (`wait_replicas`): on the cluster they are answered once one
has them, and the durable calls of one turn of the loop share one WAIT. What they do when the
replicas are gone or stop acknowledging: tests/store/test_redis_replicas.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import redis

from gateway.store.base import AdmissionOutcome
from gateway.store.redis import RedisStore
from tests.store.support import Run, admission, settlement
from tests.support.redis_cluster import LocalCluster

Stores = Callable[[], RedisStore]


def _waits(node_client_of: LocalCluster, tenant_key: str) -> int:
    """How many WAITs the master of `tenant_key` has run."""
    master = node_client_of.master_of(tenant_key)
    stats = master.info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


def test_money_writes_on_the_cluster_wait_for_a_replica_and_share_their_wait(
    cluster_stores: Stores, redis_cluster: LocalCluster, run: Run
) -> None:
    store = cluster_stores()
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    wallet_key = store.keys.wallet(tenant)
    before = _waits(redis_cluster, wallet_key)

    async def burst() -> None:
        await asyncio.gather(
            *(store.grant(tenant, 10, entry_id=f"g{i}", reason="x") for i in range(200))
        )

    run(burst())
    waits = _waits(redis_cluster, wallet_key) - before
    assert 1 <= waits < 100  # every grant waited, most of them on a WAIT they shared
    master = redis_cluster.master_of(wallet_key)
    replica = redis_cluster.replica_of(master)
    with redis.Redis(port=replica.port, single_connection_client=True) as client:
        client.execute_command("READONLY")  # (a replica answers reads only when asked so)
        assert int(client.hget(wallet_key, "balance") or 0) == 2_000  # what was answered


def test_an_admission_does_not_wait(
    cluster_stores: Stores, redis_cluster: LocalCluster, run: Run
) -> None:
    store = cluster_stores()
    adm = admission("c1", tenant="t-admit")
    key = store.keys.wallet("t-admit")
    before = _waits(redis_cluster, key)
    assert run(store.admit(adm)).outcome is AdmissionOutcome.ADMITTED
    assert _waits(redis_cluster, key) == before
    run(store.settle(settlement(adm, charge=0)))  # no charge, no reply: nothing to keep
    assert _waits(redis_cluster, key) == before
