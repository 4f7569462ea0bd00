"""`/v1/health` and `/metrics` tell the truth when a cluster master loses its replica: chats go
on being served (their money rests on the master's AOF), health says `degraded` naming that
master, the metrics show its replicas and reduced durability, and one log line says so; once
the replica is back, health is ok again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from gateway.store.redis import RedisStore
from tests.api.support import in_process_app
from tests.support.redis_cluster import LocalCluster, cluster_binaries
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until_async

pytestmark = [
    STORE_FAULTS,
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

CHAT = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "Say hello"}]


@pytest.fixture(autouse=True)
def _plain_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    """structlog's default stays (no server logging setup), so `capture_logs` sees lines."""
    monkeypatch.setattr("gateway.app.factory.configure_logging", lambda level: None)
    structlog.reset_defaults()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    binary, cli = cluster_binaries()
    with LocalCluster.running(binary, cli, tmp_path / "cluster", durable=True) as running:
        yield running


def test_a_master_without_its_replica_serves_chats_and_health_names_it(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    # The default tenant's data live on one master: its replica goes.
    master = cluster.master_of(RedisStore(cluster.url).keys.wallet("default"))
    replica = cluster.replica_of(master)

    async def scenario() -> None:
        async with in_process_app(tmp_path, store_url=cluster.url) as gw:
            health = await gw.client.get("/v1/health")
            assert health.status_code == 200, health.text
            chat = {"model": "auto", "messages": MESSAGES}
            assert (await gw.client.post(CHAT, json=chat, headers=gw.auth())).status_code == 200
            with capture_logs() as logs:
                await asyncio.to_thread(cluster.kill, replica)
                statuses = []
                for _ in range(30):
                    answer = await gw.client.post(CHAT, json=chat, headers=gw.auth())
                    statuses.append(answer.status_code)
                health = await gw.client.get("/v1/health")
                scrape = (await gw.client.get("/metrics")).text
            assert statuses == [200] * 30
            assert health.status_code == 503
            body = health.json()
            assert (body["status"], body["store"], body["shards"]) == (
                "degraded",
                "durability_reduced",
                [master.address],
            )
            assert f'gateway_store_durability_reduced{{shard="{master.address}"}} 1.0' in scrape
            assert f'gateway_store_replicas{{shard="{master.address}"}} 0.0' in scrape
            reduced = [line for line in logs if line["event"] == "store_durability_reduced"]
            assert [(line["shard"], line["aof"]) for line in reduced] == [
                (master.address, "always")
            ]
            # The replica back: health is ok again, and one line says so.
            with capture_logs() as logs:
                await asyncio.to_thread(cluster.restart, replica)
                await asyncio.to_thread(cluster.wait_healthy)

                async def status() -> int:
                    return (await gw.client.get("/v1/health")).status_code

                await wait_until_async(status, lambda code: code == 200, what="health ok")
            restored = [line for line in logs if line["event"] == "store_durability_restored"]
            assert [line["shard"] for line in restored] == [master.address]

    asyncio.run(scenario())
