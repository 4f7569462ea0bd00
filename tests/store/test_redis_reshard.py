"""A changed `?shards=` strands no queued, paid task: `gateway store migrate`, run with the new
count, moves every open task's queue entry (and its tenant's registration) to its shard of that
count and deletes the old shards. On one real Redis and on the real local cluster."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from gateway.store.redis import RedisStore
from gateway.store.redis.migrate import migrate_layout
from gateway.store.redis.shard_count import written_shard_count
from tests.store.conftest import CALL_BOUND_SECONDS
from tests.store.support import Run
from tests.store.task_support import SHORT, balanced, create, lapse, made
from tests.support import preloaded
from tests.support.gateway_process import ROOT
from tests.support.ports import free_port
from tests.support.redis_cluster import LocalCluster
from tests.support.redis_server import RedisServer

TENANTS = [f"t{i}" for i in range(6)]  # spread over several shards of either count

Opened = Callable[[int], RedisStore]
"""A store on the test's Redis (and prefix) with `shards` queue shards."""


@pytest.fixture(params=["redis", "cluster"])
def stores(
    request: pytest.FixtureRequest, runner: asyncio.Runner
) -> Iterator[tuple[Opened, Callable[[], list[bytes]]]]:
    prefix = f"test:{uuid.uuid4().hex}:"
    if request.param == "redis":
        base = request.getfixturevalue("redis_url").split("?")[0]
        url = f"{base}?"
        nodes: list[redis.Redis] = [redis.Redis.from_url(base)]
    else:
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        url = f"{cluster.url}&" if "?" in cluster.url else f"{cluster.url}?"
        nodes = [node.client() for node in cluster.masters()]
    opened: list[RedisStore] = []

    def open_store(shards: int) -> RedisStore:
        store = RedisStore(
            f"{url}shards={shards}", prefix=prefix, socket_timeout=CALL_BOUND_SECONDS
        )
        runner.run(store.open())
        opened.append(store)
        return store

    def keys() -> list[bytes]:
        return [k for node in nodes for k in node.scan_iter(match=f"{prefix}*", count=1000)]

    yield open_store, keys
    for store in opened:
        runner.run(store.close())
    for node in nodes:
        for key in node.scan_iter(match=f"{prefix}*", count=1000):
            node.unlink(key)
        node.close()


def test_migrate_moves_queued_tasks_to_the_new_shard_count(
    stores: tuple[Opened, Callable[[], list[bytes]]], run: Run
) -> None:
    open_store, keys = stores
    before = open_store(16)
    for tenant in TENANTS:
        run(before.grant(tenant, 1_000, entry_id="g1", reason="top-up"))
        made(before, run, create(f"{tenant}-task", tenant=tenant, price=250))
    running = run(before.claim_task("w-old", lease_seconds=SHORT))
    assert running is not None  # its gateway stopped while it ran: its lease will run out

    after = open_store(4)
    assert run(after.claim_task("w-new", lease_seconds=30)) is None  # stranded until moved
    report = run(migrate_layout(after))
    assert report.moved["queued_task"] == len(TENANTS)  # the running one's entry too
    assert report.dropped["queue_shard_queue"] > 0

    queued = {f"{t}-task" for t in TENANTS} - {running.task_id}
    claimed = set()
    while (task := run(after.claim_task("w-new", lease_seconds=30))) is not None:
        assert task.attempts == 1
        claimed.add(task.task_id)
    assert claimed == queued
    lapse()
    late = run(after.claim_task("w-new", lease_seconds=30))
    assert late is not None and (late.task_id, late.attempts) == (running.task_id, 2)
    for tenant in TENANTS:
        assert balanced(after, run, tenant) == 750  # debited once, never refunded

    assert run(migrate_layout(after)).lines() == [
        "nothing to migrate: the store is in the current layout"
    ]
    assert not [k for k in keys() if b"{q16." in k]


def test_the_count_is_recorded_and_another_one_found(
    stores: tuple[Opened, Callable[[], list[bytes]]], run: Run
) -> None:
    open_store, _ = stores
    before, after = open_store(16), open_store(4)
    made(before, run, create("t0-task", tenant="t0", price=0))
    # Written before the count was recorded: the other count's shards are found (once).
    assert run(written_shard_count(after)) == 16
    assert run(before.client.get(before.keys.queue_shards())) is None
    assert run(written_shard_count(before)) == 16  # the first to ask with the count: recorded
    assert run(before.client.get(before.keys.queue_shards())) == b"16"
    assert run(written_shard_count(after)) == 16
    run(migrate_layout(after))
    assert run(written_shard_count(after)) == 4
    assert run(written_shard_count(before)) == 4  # (the old URL is the wrong one now)


def test_a_gateway_with_the_new_count_is_refused_and_the_command_moves_them(
    redis_binary: str, tmp_path: Path, run: Run
) -> None:
    """As an operator meets it, on a Redis of its own (the commands' default prefix): `gateway
    serve` and `gateway worker` with the new URL refuse to start, naming the command; `gateway
    store migrate` with it moves the tasks."""
    with RedisServer.running(redis_binary, tmp_path / "redis") as server:
        before = RedisStore(f"{server.url}?shards=16")
        after = RedisStore(f"{server.url}?shards=4")
        run(before.open())
        run(after.open())
        try:
            for tenant in TENANTS[:3]:
                run(before.grant(tenant, 1_000, entry_id="g1", reason="top-up"))
                made(before, run, create(f"{tenant}-task", tenant=tenant, price=250))
            env = {
                **os.environ,
                "GATEWAY_DATA_DIR": str(tmp_path / "data"),
                "GATEWAY_CONFIG": str(ROOT / "config" / "gateway.toml"),
                "GATEWAY_STORE_URL": f"{server.url}?shards=4",
            }
            env["GATEWAY_PORT"] = str(free_port())
            refused = preloaded.run(["serve"], env=env, cwd=tmp_path)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert "gateway: GATEWAY_STORE_URL: ?shards=4" in refused.stderr
            assert "has 16 shards" in refused.stderr
            assert "`gateway store migrate`" in refused.stderr
            worker = preloaded.run(["worker"], env=env, cwd=tmp_path)  # (a worker of its own)
            assert worker.returncode == 2, worker.stdout + worker.stderr
            assert "`gateway store migrate`" in worker.stderr
            result = preloaded.run(["store", "migrate"], env=env, cwd=tmp_path)
            assert result.returncode == 0, result.stderr
            assert "moved queued_task: 3" in result.stdout.splitlines()
            claimed = set()
            while (task := run(after.claim_task("w-new", lease_seconds=30))) is not None:
                claimed.add(task.task_id)
            assert claimed == {f"{t}-task" for t in TENANTS[:3]}
        finally:
            run(before.close())
            run(after.close())
