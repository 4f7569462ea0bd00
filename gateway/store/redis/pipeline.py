"""A small pipelined RESP client for the request path's EVALSHA calls (admit, settle, release).

redis-py spends more CPU per call than Redis does: a pool checkout and release, an
`asyncio.timeout` per read and send, retry wrappers, a generic encoder. Here one long-lived
connection per store carries every hot-path call: a request is packed and written at once, and
replies, which Redis sends in the order it received the requests, resolve the waiting futures
in FIFO order as the C parser (`hiredis.Reader`) yields them.

Failures look as they do with redis-py, so the store maps them unchanged: error replies become
redis-py's exception classes (its own `parse_error`), a lost connection `ConnectionError` for
every pending call, a reply later than `socket_timeout` `TimeoutError`. A timed-out connection
is closed, as its FIFO can no longer be trusted; the next call reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

import hiredis
from redis._parsers.base import BaseParser
from redis.asyncio.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, InvalidResponse, NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["LuaScript", "ScriptPipeline"]

_SLACK = 0.001
"""A timer may fire a clock tick before its deadline; the watchdog then counts it as due."""


class LuaScript(NamedTuple):
    """A script's precomputed request heads: EVALSHA by SHA, or EVAL with the source."""

    evalsha: bytes
    eval: bytes

    @classmethod
    def of(cls, source: str) -> LuaScript:
        body = source.encode()
        sha = hashlib.sha1(body).hexdigest().encode()
        return cls(b"$7\r\nEVALSHA\r\n$40\r\n" + sha + b"\r\n", _bulk(b"EVAL") + _bulk(body))


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def _encode(value: object) -> bytes:
    """What redis-py's encoder makes of a value (bytes, str, int, float; no bool)."""
    if isinstance(value, bool):
        raise DataError(f"Invalid input of type: {type(value).__name__!r}")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, int | float):
        return repr(value).encode()
    if isinstance(value, str):
        return value.encode()
    raise DataError(f"Invalid input of type: {type(value).__name__!r}")


def _command(head: bytes, keys: Sequence[Any], args: Sequence[Any]) -> bytes:
    """`*N` + a script head (EVALSHA sha / EVAL source) + numkeys, keys and args as bulks."""
    numkeys = b"%d" % len(keys)
    parts = [b"*%d\r\n%b$%d\r\n%b\r\n" % (3 + len(keys) + len(args), head, len(numkeys), numkeys)]
    for value in (*keys, *args):
        kind = type(value)  # the common types inline: this runs ~25 times per call
        if kind is str:
            data = value.encode()
        elif kind is int:
            data = b"%d" % value
        elif kind is bytes:
            data = value
        else:
            data = _encode(value)
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


_reply_error: Callable[[str], Exception] = BaseParser.parse_error
"""redis-py's own mapping of an error reply to an exception (NOSCRIPT, LOADING, ...)."""


class _Connection(asyncio.Protocol):
    """One socket: futures waiting in request order, and a watchdog on the oldest one's deadline.

    Deadlines grow along the FIFO, so one timer (re-armed lazily, not per call) suffices: when
    the head is overdue the whole connection is failed and aborted.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.loop = loop
        self.timeout = timeout
        self.alive = False
        self.transport: asyncio.Transport | None = None
        self.pending: deque[tuple[asyncio.Future[Any], float]] = deque()
        self.reader = hiredis.Reader(protocolError=InvalidResponse, replyError=_reply_error)
        self.watchdog: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport, self.alive = cast(asyncio.Transport, transport), True

    def data_received(self, data: bytes) -> None:
        reader, pending = self.reader, self.pending
        reader.feed(data)
        try:
            while (reply := reader.gets()) is not False:
                future = pending.popleft()[0]
                if not future.done():  # a cancelled caller's reply is skipped
                    future.set_result(reply)
        except (InvalidResponse, IndexError) as exc:  # garbage, or a reply nobody asked for
            self.fail(RedisConnectionError(f"Invalid reply from Redis: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(RedisConnectionError("Connection to Redis lost"))

    def fail(self, error: Exception) -> None:
        """Fail every pending call with `error` and drop the connection."""
        self.alive = False
        if self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None
        pending, self.pending = self.pending, deque()
        for future, _ in pending:
            if not future.done():
                future.set_exception(error)
        if self.transport is not None:
            with contextlib.suppress(RuntimeError):  # its loop may be closed already
                self.transport.abort()

    def send(self, data: bytes) -> asyncio.Future[Any]:
        future = self.loop.create_future()
        self.pending.append((future, self.loop.time() + self.timeout))
        assert self.transport is not None
        self.transport.write(data)
        if self.watchdog is None:
            self.watchdog = self.loop.call_later(self.timeout, self._check)
        return future

    def _check(self) -> None:
        self.watchdog = None
        if not self.pending:
            return
        deadline = self.pending[0][1]
        if self.loop.time() + _SLACK >= deadline:
            self.fail(RedisTimeoutError("Timeout reading from Redis"))
        else:
            self.watchdog = self.loop.call_at(deadline, self._check)

    async def call(self, data: bytes) -> Any:
        reply = await self.send(data)
        if isinstance(reply, Exception):
            raise reply
        return reply


class ScriptPipeline:
    """EVALSHA over one lazily opened, pipelined connection (redis:// and unix:// URLs).

    Creating it does not contact Redis; the first call connects (AUTH and SELECT as the URL
    says), and a call after the connection was lost reconnects. Concurrent first calls share
    one connection attempt.
    """

    def __init__(self, url: str, *, socket_timeout: float, connect_timeout: float) -> None:
        self._params = parse_url(url)
        self._timeout = socket_timeout
        self._connect_timeout = connect_timeout
        self._conn: _Connection | None = None
        self._connecting: asyncio.Task[_Connection] | None = None

    async def evalsha(
        self, script: LuaScript, keys: Sequence[object], args: Sequence[object]
    ) -> Any:
        """Run `script` by SHA; on NOSCRIPT (Redis restarted, SCRIPT FLUSH) once by source."""
        conn = self._conn
        if conn is None or not conn.alive or conn.loop is not asyncio.get_running_loop():
            conn = await self._connection()
        try:
            return await conn.call(_command(script.evalsha, keys, args))
        except NoScriptError:
            # EVAL runs the script and caches it, so later EVALSHAs find it again.
            conn = await self._connection()
            return await conn.call(_command(script.eval, keys, args))

    async def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = self._conn
        if conn is not None and conn.alive and conn.loop is loop:
            return conn
        task = self._connecting
        if task is None or task.get_loop() is not loop:
            task = self._connecting = loop.create_task(self._connect(loop))
            task.add_done_callback(self._connected)
        # Shielded: a cancelled caller must not cancel the attempt the others wait on.
        return await asyncio.shield(task)

    def _connected(self, task: asyncio.Task[_Connection]) -> None:
        if self._connecting is task:
            self._connecting = None

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        if self._conn is not None:
            self._conn.fail(RedisConnectionError("Connection replaced"))
            self._conn = None
        p = self._params
        conn = _Connection(loop, self._timeout)
        try:
            async with asyncio.timeout(self._connect_timeout):
                if "path" in p:
                    await loop.create_unix_connection(lambda: conn, p["path"])
                else:
                    host, port = p.get("host", "localhost"), p.get("port", 6379)
                    await loop.create_connection(lambda: conn, host, port)
        except TimeoutError as exc:
            raise RedisTimeoutError("Timeout connecting to Redis") from exc
        except OSError as exc:
            raise RedisConnectionError(f"Error connecting to Redis: {exc}") from exc
        try:
            if "password" in p:
                user = (_bulk(p["username"].encode()),) if "username" in p else ()
                auth = (_bulk(b"AUTH"), *user, _bulk(p["password"].encode()))
                await conn.call(b"*%d\r\n%b" % (len(auth), b"".join(auth)))
            if p.get("db"):
                await conn.call(b"*2\r\n$6\r\nSELECT\r\n" + _bulk(b"%d" % p["db"]))
        except BaseException:
            conn.fail(RedisConnectionError("Connection setup failed"))
            raise
        self._conn = conn
        return conn

    async def close(self) -> None:
        task, self._connecting = self._connecting, None
        if task is not None and not task.done():
            task.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.fail(RedisConnectionError("Connection closed"))
