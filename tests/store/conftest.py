"""The `store` fixture: every contract test runs once on SQLite and once on real Redis.

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


def _delete_prefix(url: str, prefix: str) -> None:
    with redis.Redis.from_url(url) as client:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.unlink(*keys)


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop_runner:
        yield loop_runner


@pytest.fixture
def run(runner: asyncio.Runner) -> Run:
    return runner.run


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
        store = RedisStore(redis_url, prefix=redis_prefix)
        runner.run(store.open())
        opened.append(store)
        return store

    yield make
    for store in opened:
        runner.run(store.close())


@pytest.fixture(params=["sqlite", "redis"])
def store(
    request: pytest.FixtureRequest, runner: asyncio.Runner, tmp_path: Path
) -> Iterator[Store]:
    if request.param == "redis":
        make: Callable[[], RedisStore] = request.getfixturevalue("redis_stores")
        yield make()
        return
    sqlite_store = SqliteStore(tmp_path / "gateway.db")
    runner.run(sqlite_store.open())
    yield sqlite_store
    runner.run(sqlite_store.close())
