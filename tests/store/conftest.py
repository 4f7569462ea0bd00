"""The `store` fixture: every contract test runs on SQLite, on one real Redis and on a real local
Redis Cluster (3 masters, 3 replicas: tests/support/redis_cluster.py).

Tests are plain functions that drive coroutines through `run` (one event loop per test), so
no async plugin is needed. Each Redis test gets a key prefix of its own, deleted afterwards:
tests never see each other's data, and a shared Redis (REDIS_URL) is never flushed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from gateway.store.base import Store
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore
from tests.store.support import Run
from tests.support.redis_cluster import LocalCluster, redis_cluster

__all__ = [
    "CALL_BOUND_SECONDS",
    "cluster_stores",
    "redis_cluster",
    "redis_prefix",
    "redis_stores",
    "run",
    "runner",
    "store",
]


CALL_BOUND_SECONDS = 10.0
"""How long a contract test's store waits for a Redis call (the gateway's default is 2 s). These
tests check what the store does; on a machine whose two cores the whole suite keeps busy, a
read of the shared cluster once took longer than 2 s (a CI-like run, 2026-11-27). The bound
itself has tests of its own, on paused servers (tests/store/test_redis_pipeline.py,
tests/e2e/test_store_stall_*.py)."""


def _delete_prefix(url: str, prefix: str) -> None:
    with redis.Redis.from_url(url) as client:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.unlink(*keys)


def _delete_cluster_prefix(cluster: LocalCluster, prefix: str) -> None:
    """Every key of `prefix` on every master (a cluster deletes one slot's keys at a time)."""
    for node in cluster.masters():
        with node.client() as client:
            for key in list(client.scan_iter(match=f"{prefix}*", count=1000)):
                client.unlink(key)


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop_runner:
        yield loop_runner


@pytest.fixture
def run(runner: asyncio.Runner) -> Run:
    """Runs a coroutine to its end on the test's loop. The loop's own `run_until_complete`, not
    `Runner.run`, which installs and restores a SIGINT handler on every call: the stateful
    tests make ~30,000 calls, and it was ~18 % of their CPU."""
    return runner.get_loop().run_until_complete


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix for this test alone; its keys are deleted when the test ends."""
    prefix = f"test:{uuid.uuid4().hex}:"
    yield prefix
    _delete_prefix(redis_url, prefix)


@pytest.fixture
def redis_stores(
    runner: asyncio.Runner, redis_url: str, redis_prefix: str
) -> Iterator[Callable[[], RedisStore]]:
    """Opens RedisStores (each with its own connection pool) on one prefix; closes them all."""
    opened: list[RedisStore] = []

    def make() -> RedisStore:
        store = RedisStore(redis_url, prefix=redis_prefix, socket_timeout=CALL_BOUND_SECONDS)
        runner.run(store.open())
        opened.append(store)
        return store

    yield make
    for store in opened:
        runner.run(store.close())


@pytest.fixture
def cluster_stores(
    runner: asyncio.Runner, redis_cluster: LocalCluster
) -> Iterator[Callable[[], RedisStore]]:
    """`redis_stores` on the session's Redis Cluster: one prefix, deleted afterwards."""
    prefix = f"test:{uuid.uuid4().hex}:"
    opened: list[RedisStore] = []

    def make() -> RedisStore:
        store = RedisStore(redis_cluster.url, prefix=prefix, socket_timeout=CALL_BOUND_SECONDS)
        runner.run(store.open())
        opened.append(store)
        return store

    yield make
    for store in opened:
        runner.run(store.close())
    _delete_cluster_prefix(redis_cluster, prefix)


@pytest.fixture(params=["sqlite", "redis", "cluster"])
def store(
    request: pytest.FixtureRequest, runner: asyncio.Runner, tmp_path: Path
) -> Iterator[Store]:
    if request.param in ("redis", "cluster"):
        stores = "redis_stores" if request.param == "redis" else "cluster_stores"
        make: Callable[[], RedisStore] = request.getfixturevalue(stores)
        yield make()
        return
    sqlite_store = SqliteStore(tmp_path / "gateway.db")
    runner.run(sqlite_store.open())
    yield sqlite_store
    runner.run(sqlite_store.close())
