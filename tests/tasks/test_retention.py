"""The periodic task retention job (`gateway.tasks.retention`): the routing file's retention
reaches the store, a round is bounded, and on Redis the backfill of the listing indexes comes
first, once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import redis

from gateway.config.schema import GatewaySection
from gateway.store.base import Store, TaskFinal
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore
from gateway.tasks import retention
from gateway.tasks.retention import apply_task_retention, sweep_tasks
from tests.store.listing_support import make_task, make_tasks
from tests.support.clock import Clock


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop_runner:
        yield loop_runner


async def _ended(store: Store, count: int) -> None:
    await make_tasks(store, ((f"task_{i}", "text_to_image") for i in range(count)))
    for i in range(count):
        await store.finalize_task(TaskFinal(tenant="t1", task_id=f"task_{i}", status="succeeded"))


def test_the_routing_files_retention_decides_when_ended_tasks_go(
    tmp_path: Path, runner: asyncio.Runner
) -> None:
    clock = Clock()
    store = SqliteStore(tmp_path / "g.db", clock=clock)
    runner.run(store.open())
    try:
        runner.run(_ended(store, 3))
        runner.run(make_task(store, "queued_0"))
        apply_task_retention(store, msgspec.convert({"task_retention_days": 2}, GatewaySection))
        clock.advance(86_400)
        assert runner.run(sweep_tasks(store)) == 0
        clock.advance(86_400 + 1)
        assert runner.run(sweep_tasks(store)) == 3
        clock.advance(365 * 86_400)
        assert runner.run(sweep_tasks(store)) == 0  # queued tasks are never removed
        assert runner.run(store.get_task("t1", "queued_0")) is not None
    finally:
        runner.run(store.close())


def test_a_round_of_the_job_is_bounded(
    tmp_path: Path, runner: asyncio.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "SWEEP_BATCH", 4)
    monkeypatch.setattr(retention, "SWEEP_ROUNDS", 2)
    clock = Clock()
    store = SqliteStore(tmp_path / "g.db", clock=clock)
    runner.run(store.open())
    try:
        runner.run(_ended(store, 10))
        clock.advance(31 * 86_400)  # past the default retention (30 days)
        assert [runner.run(sweep_tasks(store)) for _ in range(3)] == [8, 2, 0]
    finally:
        runner.run(store.close())


def test_the_days_are_at_least_one() -> None:
    assert GatewaySection().task_retention_days == 30
    with pytest.raises(msgspec.ValidationError, match="task_retention_days"):
        msgspec.convert({"task_retention_days": 0.5}, GatewaySection)


def test_on_redis_the_job_backfills_the_listing_indexes_first(
    redis_url: str, runner: asyncio.Runner
) -> None:
    prefix = f"test:{uuid.uuid4().hex}:"
    store = RedisStore(redis_url, prefix=prefix)
    runner.run(store.open())
    try:
        runner.run(make_task(store, "task_a", capability="text_to_music"))
        with redis.Redis.from_url(redis_url) as sync:
            for key in sync.scan_iter(match=store.keys.task_index("*", "*", "*")):
                sync.delete(key)  # as written before the indexes existed
            assert sync.get(store.keys.task_index_version()) is None
            assert runner.run(sweep_tasks(store)) == 0
            assert sync.get(store.keys.task_index_version()) == b"1"
        page = runner.run(store.list_tasks("t1", limit=5, capability="text_to_music"))
        assert [t.task_id for t in page.tasks] == ["task_a"]
    finally:
        runner.run(store.close())
        with redis.Redis.from_url(redis_url) as sync:
            keys = list(sync.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                sync.unlink(*keys)
