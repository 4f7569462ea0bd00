"""Money writes wait for a replica (`wait_replicas`): on the cluster they are answered once one
has them, the durable calls of one turn of the loop share one WAIT, and a write too few
replicas acknowledged is an unknown outcome (StoreUnavailable), not an answer."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
import redis

from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome
from gateway.store.redis import RedisStore
from gateway.store.redis.pipeline import ReplicationTimeout
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


def test_a_write_no_replica_acknowledged_is_an_unknown_outcome(
    redis_url: str, redis_prefix: str, run: Run
) -> None:
    base = redis_url.split("?")[0]
    waiting = RedisStore(f"{base}?wait_replicas=1&wait_ms=50", prefix=redis_prefix)
    plain = RedisStore(base, prefix=redis_prefix)
    run(waiting.open())
    run(plain.open())
    try:
        with pytest.raises(StoreUnavailable) as caught:  # one server: no replica to wait for
            run(waiting.grant("t1", 100, entry_id="g1", reason="x"))
        assert isinstance(caught.value.__cause__, ReplicationTimeout)
        # It ran, and could have been lost: the caller treats it as unknown (retries it, or
        # undoes it), and a retry of this idempotent step applies it once.
        assert run(plain.wallet("t1")).balance_units == 100
        assert run(plain.grant("t1", 100, entry_id="g1", reason="x")).amount_units == 100
        assert run(plain.wallet("t1")).balance_units == 100
        assert run(waiting.admit(admission("c1"))).outcome is AdmissionOutcome.ADMITTED
    finally:
        run(waiting.close())
        run(plain.close())
