"""The pipelined EVALSHA client behind the Redis store's request path: replies matched in order,
script reloads, error replies, a connection killed mid-flight, and a server that stops answering.

`CLIENT PAUSE ... WRITE` holds every script call (scripts without the no-writes flag count as
writes) while leaving other commands, such as CLIENT KILL, served: calls stay pending, on demand.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome
from gateway.store.redis import RedisStore
from gateway.store.redis.connection import bulk, encode
from gateway.store.redis.pipeline import LuaScript, ScriptPipeline, _command
from tests.store.support import Run, admission
from tests.support.waiting import wait_until_async

Use = Callable[[Callable[[ScriptPipeline, redis.asyncio.Redis], Coroutine[Any, Any, None]]], None]


def _echo() -> LuaScript:
    """A script of its own (a fresh SHA), returning its keys and arguments."""
    return LuaScript.of(f"-- {uuid.uuid4().hex}\nreturn {{KEYS[1], ARGV[1], ARGV[2]}}")


@pytest.fixture
def use(run: Run, redis_url: str) -> Use:
    """Runs a test body with a pipeline (2 s timeout) and a redis-py admin client."""

    def go(
        body: Callable[[ScriptPipeline, redis.asyncio.Redis], Coroutine[Any, Any, None]],
    ) -> None:
        async def main() -> None:
            pipe = ScriptPipeline(redis_url, socket_timeout=2.0, connect_timeout=1.0)
            admin = redis.asyncio.Redis.from_url(redis_url)
            try:
                await body(pipe, admin)
            finally:
                await pipe.close()
                await admin.aclose()

        run(main())

    return go


@asynccontextmanager
async def _paused(admin: redis.asyncio.Redis) -> AsyncIterator[None]:
    """Redis holds script calls (not admin commands) until the block ends."""
    await admin.client_pause(5000, all=False)
    try:
        yield
    finally:
        await admin.client_unpause()


async def _until_pending(pipe: ScriptPipeline, count: int) -> None:
    def pending() -> int:
        conn = pipe._conn
        return 0 if conn is None else len(conn.pending)

    await wait_until_async(pending, lambda n: n >= count, seconds=5, what=f"{count} calls pending")


def test_concurrent_calls_get_their_own_replies(use: Use) -> None:
    script = _echo()

    async def body(pipe: ScriptPipeline, admin: redis.asyncio.Redis) -> None:
        calls = [pipe.evalsha(script, [f"k{i}"], [i, f"s{i}".encode()]) for i in range(500)]
        replies = await asyncio.gather(*calls)
        assert replies == [[f"k{i}".encode(), b"%d" % i, b"s%d" % i] for i in range(500)]

    use(body)


def test_the_calls_of_one_turn_of_the_loop_go_out_in_one_write(use: Use) -> None:
    script = _echo()

    async def body(pipe: ScriptPipeline, admin: redis.asyncio.Redis) -> None:
        await pipe.evalsha(script, ["k"], [0, b"loaded"])  # connected, the script cached
        conn = pipe._conn
        assert conn is not None and conn.transport is not None
        writes: list[bytes] = []
        real_write = conn.transport.write

        def recording_write(data: bytes) -> None:
            writes.append(bytes(data))
            real_write(data)

        conn.transport.write = recording_write  # type: ignore[method-assign]
        calls = [pipe.evalsha(script, [f"k{i}"], [i, b"s"]) for i in range(5)]
        replies = await asyncio.gather(*calls)
        assert replies == [[f"k{i}".encode(), b"%d" % i, b"s"] for i in range(5)]
        assert len(writes) == 1
        assert writes[0].count(b"EVALSHA") == 5
        assert await pipe.evalsha(script, ["k"], [9, b"later"]) == [b"k", b"9", b"later"]
        assert len(writes) == 2

    use(body)


def test_arguments_are_encoded_as_redis_py_does(use: Use) -> None:
    script = _echo()

    async def body(pipe: ScriptPipeline, admin: redis.asyncio.Redis) -> None:
        assert await pipe.evalsha(script, ["κ"], [0.25, "é"]) == [
            "κ".encode(),
            b"0.25",
            "é".encode(),
        ]
        with pytest.raises(DataError):
            await pipe.evalsha(script, ["k"], [True, 1])

    use(body)


@pytest.mark.parametrize(
    "args",
    [
        ["é", 0, -3, 2**70, 0.25, 1e20, float("inf"), -0.0, b"raw", ""],
        [bytearray(b"bytearray goes the long way"), 7],
    ],
)
def test_a_call_is_packed_as_each_value_alone_would_be(args: list[Any]) -> None:
    script = LuaScript.of("return 1")
    keys = ["k{t}", "κ"]
    each = [bulk(encode(v)) for v in (len(keys), *keys, *args)]
    expected = b"*%d\r\n" % (len(each) + 2) + script.evalsha + b"".join(each)
    assert _command(script.evalsha, keys, args) == expected


def test_noscript_reloads_the_script(use: Use) -> None:
    script = _echo()

    async def body(pipe: ScriptPipeline, admin: redis.asyncio.Redis) -> None:
        assert await pipe.evalsha(script, ["k"], [1, 2]) == [b"k", b"1", b"2"]
        await admin.script_flush()
        calls = [pipe.evalsha(script, ["k"], [i, 2]) for i in range(20)]
        assert await asyncio.gather(*calls) == [[b"k", b"%d" % i, b"2"] for i in range(20)]
        assert await admin.script_exists(script.evalsha[-42:-2].decode()) == [True]

    use(body)


def test_error_reply_raises_and_the_connection_carries_on(use: Use) -> None:
    failing = LuaScript.of("return redis.error_reply('ERR boom ' .. ARGV[1])")
    script = _echo()

    async def body(pipe: ScriptPipeline, admin: redis.asyncio.Redis) -> None:
        results = await asyncio.gather(
            pipe.evalsha(failing, [], ["x"]),
            pipe.evalsha(script, ["k"], [1, 2]),
            return_exceptions=True,
        )
        assert isinstance(results[0], ResponseError) and "boom x" in str(results[0])
        assert results[1] == [b"k", b"1", b"2"]

    use(body)


def test_killed_connection_fails_pending_calls_then_reconnects(use: Use) -> None:
    script = _echo()

    async def body(pipe: ScriptPipeline, admin: redis.asyncio.Redis) -> None:
        await pipe.evalsha(script, ["k"], [1, 2])
        conn = pipe._conn
        assert conn is not None and conn.transport is not None
        host, port = conn.transport.get_extra_info("sockname")[:2]
        async with _paused(admin):
            calls = [asyncio.ensure_future(pipe.evalsha(script, ["k"], [i, 2])) for i in range(10)]
            await _until_pending(pipe, 10)
            await admin.client_kill(f"{host}:{port}")
            results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, RedisConnectionError) for r in results), results
        assert await pipe.evalsha(script, ["k"], [3, 4]) == [b"k", b"3", b"4"]
        assert pipe._conn is not conn

    use(body)


def test_a_server_that_stops_answering_times_out(use: Use, redis_url: str) -> None:
    script = _echo()

    async def body(pipe: ScriptPipeline, admin: redis.asyncio.Redis) -> None:
        short = ScriptPipeline(redis_url, socket_timeout=0.2, connect_timeout=1.0)
        try:
            await short.evalsha(script, ["k"], [1, 2])
            async with _paused(admin):
                loop = asyncio.get_running_loop()
                started = loop.time()
                results = await asyncio.gather(
                    *(short.evalsha(script, ["k"], [i, 2]) for i in range(5)),
                    return_exceptions=True,
                )
                assert loop.time() - started < 1.0
            assert all(isinstance(r, RedisTimeoutError) for r in results), results
            assert await short.evalsha(script, ["k"], [3, 4]) == [b"k", b"3", b"4"]
        finally:
            await short.close()

    use(body)


def test_store_maps_pipeline_failures_to_store_unavailable(
    run: Run, redis_url: str, redis_prefix: str
) -> None:
    async def main() -> None:
        store = RedisStore(redis_url, prefix=redis_prefix, socket_timeout=0.2)
        admin = redis.asyncio.Redis.from_url(redis_url)
        await store.open()
        try:
            assert (await store.admit(admission("c1"))).outcome is AdmissionOutcome.ADMITTED
            async with _paused(admin):
                with pytest.raises(StoreUnavailable) as caught:
                    await store.admit(admission("c2"))
            assert isinstance(caught.value.__cause__, RedisTimeoutError)
            assert (await store.admit(admission("c3"))).outcome is AdmissionOutcome.ADMITTED
        finally:
            await store.close()
            await admin.aclose()

    run(main())


def test_select_and_auth_come_from_the_url(run: Run, redis_url: str) -> None:
    script = LuaScript.of("return redis.call('SET', KEYS[1], ARGV[1])")
    key = f"test:{uuid.uuid4().hex}"
    base = redis_url.rsplit("/", 1)[0]

    async def main() -> None:
        pipe = ScriptPipeline(f"{base}/5", socket_timeout=2.0, connect_timeout=1.0)
        db5 = redis.asyncio.Redis.from_url(f"{base}/5")
        try:
            await pipe.evalsha(script, [key], ["v"])
            assert await db5.get(key) == b"v"
            await db5.delete(key)
        finally:
            await pipe.close()
            await db5.aclose()
        wrong = ScriptPipeline(
            f"redis://nobody:wrong@{base.split('//', 1)[1]}/0",
            socket_timeout=2.0,
            connect_timeout=1.0,
        )
        try:
            with pytest.raises(RedisConnectionError):  # AuthenticationError, as with redis-py
                await wrong.evalsha(script, [key], ["v"])
        finally:
            await wrong.close()

    run(main())


def test_works_on_uvloop(redis_url: str) -> None:
    """The gateway serves on uvloop, whose transports differ from asyncio's in small ways."""
    uvloop = pytest.importorskip("uvloop")
    script = _echo()

    async def main() -> None:
        pipe = ScriptPipeline(redis_url, socket_timeout=2.0, connect_timeout=1.0)
        try:
            calls = [pipe.evalsha(script, [f"k{i}"], [i, 0]) for i in range(200)]
            replies = await asyncio.gather(*calls)
            assert replies == [[f"k{i}".encode(), b"%d" % i, b"0"] for i in range(200)]
        finally:
            await pipe.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
