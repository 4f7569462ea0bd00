"""Backend errors become `StoreUnavailable` in one place per backend, in every area.

`StoreErrorMap` is the mapping; each backend has one (`redis/errors.py`, `sqlite/errors.py`)
around every call into its library. The proofs: an unreachable Redis, and a SQLite file whose
write lock another process holds past the busy timeout, fail each area's operations with
`StoreUnavailable` whose cause is the library's error.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
import uvloop
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.errors import StoreUnavailable
from gateway.store.base import ApiKeyRecord, Store
from gateway.store.errors import StoreErrorMap
from gateway.store.redis import RedisStore
from gateway.store.redis.codec import key_record
from gateway.store.redis.errors import store_errors as redis_errors
from gateway.store.sqlite import SqliteStore
from tests.store.support import Run, admission, release, settlement
from tests.store.test_artifacts_store import artifact
from tests.store.test_tasks import create

Op = Callable[[Store], Coroutine[Any, Any, Any]]


def test_a_mapped_error_leaves_as_store_unavailable_from_it() -> None:
    mapping = StoreErrorMap(KeyError, OSError)
    original = OSError("gone")
    with pytest.raises(StoreUnavailable) as caught, mapping:
        raise original
    assert caught.value.__cause__ is original
    with pytest.raises(ValueError), mapping:  # anything else passes through untouched
        raise ValueError("a bug")
    with mapping, mapping:  # stateless: one instance serves every call, nested too
        pass


@pytest.mark.parametrize("error", [RedisConnectionError("x"), RedisTimeoutError("x")])
def test_redis_connection_errors_and_timeouts_are_mapped(error: Exception) -> None:
    with pytest.raises(StoreUnavailable), redis_errors:
        raise error
    with pytest.raises(ResponseError), redis_errors:  # Redis answered: not "unavailable"
        raise ResponseError("WRONGTYPE")


def test_a_write_on_a_connection_uvloop_found_closed_is_store_unavailable(redis_url: str) -> None:
    """A killed primary, as the gateway's loop (uvloop) and redis-py meet it: the peer is gone,
    uvloop has closed the transport, and the next command's write raises `RuntimeError`, which
    redis-py lets through. In a cluster failover it had answered 500 instead of 503."""

    async def scenario() -> None:
        client = redis.asyncio.Redis.from_url(redis_url, single_connection_client=True)
        try:
            await client.ping()
            connection = client.connection
            assert connection is not None
            transport = connection._writer.transport  # type: ignore[union-attr]
            transport.close()  # as uvloop does when the peer resets the connection
            await asyncio.sleep(0.05)
            with pytest.raises(StoreUnavailable) as caught, redis_errors:
                await client.ping()
            assert isinstance(caught.value.__cause__, RuntimeError)
        finally:
            await client.aclose()

    uvloop.run(scenario())
    with pytest.raises(RuntimeError), redis_errors:  # any other RuntimeError is a bug
        raise RuntimeError("Event loop is closed")


class _PausedPool:
    """A connection pool whose node went away under it, as redis-py's cluster client met a
    paused master: its own bookkeeping raises `AttributeError` from inside the client."""

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        node: Any = None
        return node.connection  # AttributeError: 'NoneType' object has no attribute ...


def test_an_unknown_error_raised_inside_redis_py_is_store_unavailable(run: Run) -> None:
    """7 of ~4,000 key lookups were answered 500 (`unhandled_exception`) while a cluster
    master paused: redis-py raised an `AttributeError` the map did not know."""

    async def scenario() -> None:
        client = redis.asyncio.Redis.from_url("redis://127.0.0.1:1/0")
        client.connection_pool = None  # type: ignore[assignment]
        try:
            with pytest.raises(StoreUnavailable) as caught, redis_errors:
                await client.get("k")  # redis-py's own frame raises
            assert isinstance(caught.value.__cause__, AttributeError)
        finally:
            client.connection_pool = redis.asyncio.ConnectionPool()

    run(scenario())


def test_an_error_raised_in_the_gateways_own_code_stays_a_bug() -> None:
    """Inside the same block, a step of the gateway's (decoding what Redis answered) that
    fails is a bug and passes through; so does redis-py's `DataError` (a bad argument)."""
    with pytest.raises(ValueError), redis_errors:
        key_record([b"key_1", b"t1", b"not a time", None, None])
    with pytest.raises(AttributeError), redis_errors:
        raise AttributeError("raised here, in neither redis-py nor the gateway")
    with pytest.raises(DataError), redis_errors:
        redis.asyncio.Redis().connection_pool.get_encoder().encode({"a": 1})  # type: ignore[no-untyped-call]


def test_a_key_lookup_whose_client_fails_inside_is_store_unavailable(
    redis_stores: Callable[[], RedisStore], run: Run
) -> None:
    store = redis_stores()
    client: Any = store.client
    pool = client.connection_pool
    client.connection_pool = _PausedPool()
    try:
        with pytest.raises(StoreUnavailable) as caught:
            run(store.get_key("hash"))
        assert isinstance(caught.value.__cause__, AttributeError)
    finally:
        client.connection_pool = pool
    assert run(store.get_key("hash")) is None


_ADMITTED = admission("c1", hold=5)

# One or more operations of each area.
_AREAS: dict[str, Op] = {
    "keys.create_key": lambda s: s.create_key(
        ApiKeyRecord(key_id="kid", tenant="t1", created_at=1.0), "hash"
    ),
    "keys.revoke_key": lambda s: s.revoke_key("kid"),
    "wallet.grant": lambda s: s.grant("t1", 1, entry_id="g2", reason="x"),
    "admission.settle": lambda s: s.settle(settlement(_ADMITTED, charge=1)),
    "tasks.create_task": lambda s: s.create_task(create("task_x")),
    "artifacts.create_artifact": lambda s: s.create_artifact(artifact("art_x")),
}

_REDIS_ONLY: dict[str, Op] = {  # SQLite reads and memory-only steps go on beside a writer
    "keys.get_key": lambda s: s.get_key("hash"),
    "keys.list_keys": lambda s: s.list_keys("t1"),
    "wallet.wallet": lambda s: s.wallet("t1"),
    "wallet.ledger": lambda s: s.ledger("t1", limit=5),
    "admission.admit": lambda s: s.admit(_ADMITTED),
    "admission.release": lambda s: s.release(release(_ADMITTED)),
    "tasks.get_task": lambda s: s.get_task("t1", "task_x"),
    "artifacts.get_artifact": lambda s: s.get_artifact("t1", "art_x"),
}


@pytest.mark.parametrize("name", sorted(_AREAS | _REDIS_ONLY))
def test_every_area_of_an_unreachable_redis_is_store_unavailable(name: str, run: Run) -> None:
    store = RedisStore("redis://127.0.0.1:1/0", connect_timeout=0.5)
    run(store.open())
    try:
        with pytest.raises(StoreUnavailable) as caught:
            run((_AREAS | _REDIS_ONLY)[name](store))
        assert isinstance(caught.value.__cause__, RedisConnectionError | RedisTimeoutError)
    finally:
        run(store.close())


@pytest.mark.parametrize("name", sorted(_AREAS))
def test_every_area_of_a_locked_sqlite_file_is_store_unavailable(
    name: str, tmp_path: Path, run: Run
) -> None:
    store = SqliteStore(tmp_path / "g.db", busy_timeout_ms=20)
    run(store.open())
    other = sqlite3.connect(tmp_path / "g.db", isolation_level=None)
    try:
        run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
        run(store.admit(_ADMITTED))
        other.execute("BEGIN IMMEDIATE")  # another process (the CLI) holds the write lock
        with pytest.raises(StoreUnavailable) as caught:
            run(_AREAS[name](store))
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    finally:
        other.close()
        run(store.close())
