"""A small pipelined RESP client for the store's scripts (the request path's, and every step
that moves money): one server, one long-lived connection.

redis-py spends more CPU per call than Redis does: a pool checkout and release, an
`asyncio.timeout` per read and send, retry wrappers, a generic encoder. Here one connection
per server carries the calls: a request is packed and written at once, and replies, which
Redis sends in the order it received the requests, resolve the waiting futures in FIFO order
as the C parser (`hiredis.Reader`) yields them. `cluster_pipeline.py` keeps one of these per
cluster master; behind Sentinel the server's address is asked of the sentinels at each connect.

Failures look as they do with redis-py, so the store maps them unchanged: error replies become
redis-py's exception classes (its own `parse_error`), a lost connection `ConnectionError` for
every pending call, a reply later than `socket_timeout` `TimeoutError`. A timed-out connection
is closed, as its FIFO can no longer be trusted; the next call reconnects. Nothing is resent.

A *durable* call (one that moves money) is followed on the same connection by `WAIT
<replicas> <ms>`: its answer comes once that many replicas have its write, so a failover
cannot lose it. All durable calls written in one turn of the event loop share one WAIT (a
group commit); fewer acknowledgements than asked is `ReplicationTimeout`, an outcome unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, cast

import hiredis
from redis._parsers.base import BaseParser
from redis.asyncio.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, InvalidResponse, NoScriptError, ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["Address", "LuaScript", "ReplicationTimeout", "ScriptPipeline", "command_bytes"]

_SLACK = 0.001
"""A timer may fire a clock tick before its deadline; the watchdog then counts it as due."""

Address = tuple[str, int]
AddressSource = Callable[[], Awaitable[Address]]
"""Where the server is now (asked at each connect; Sentinel's answer after a failover)."""


class ReplicationTimeout(RedisTimeoutError):
    """A durable call ran, but fewer replicas than asked acknowledged it within the wait: a
    failover now could lose it, so its outcome counts as unknown."""


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


def command_bytes(*args: object) -> bytes:
    """Any command as RESP (`command_bytes("ZADD", key, 0, member)`)."""
    return b"*%d\r\n" % len(args) + b"".join(_bulk(_encode(a)) for a in args)


_reply_error: Callable[[str], Exception] = BaseParser.parse_error
"""redis-py's own mapping of an error reply to an exception (NOSCRIPT, MOVED, LOADING, ...)."""


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
        self.barrier: asyncio.Future[Any] | None = None
        """The WAIT the durable calls of this turn of the loop will share, once sent."""

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

    def wait_barrier(self, replicas: int, wait_ms: int) -> asyncio.Future[Any]:
        """The WAIT that follows every durable call written in this turn of the loop."""
        barrier = self.barrier
        if barrier is None:
            barrier = self.barrier = self.loop.create_future()
            barrier.add_done_callback(_consume)
            self.loop.call_soon(self._send_wait, barrier, replicas, wait_ms)
        return barrier

    def _send_wait(self, barrier: asyncio.Future[Any], replicas: int, wait_ms: int) -> None:
        self.barrier = None
        if not self.alive:
            if not barrier.done():
                barrier.set_exception(RedisConnectionError("Connection to Redis lost"))
            return
        reply = self.send(command_bytes("WAIT", replicas, wait_ms))
        reply.add_done_callback(lambda done: _chain(done, barrier))


def _chain(source: asyncio.Future[Any], target: asyncio.Future[Any]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif (error := source.exception()) is not None:
        target.set_exception(error)
    else:
        target.set_result(source.result())


def _consume(future: asyncio.Future[Any]) -> None:
    """A barrier whose callers all gave up: read its outcome so that asyncio does not warn."""
    if not future.cancelled():
        future.exception()


def ssl_context(params: dict[str, Any]) -> ssl.SSLContext:
    """A client TLS context from a `rediss://` URL's options (redis-py's names)."""
    context = ssl.create_default_context(cafile=params.get("ssl_ca_certs"))
    if params.get("ssl_certfile"):
        context.load_cert_chain(params["ssl_certfile"], params.get("ssl_keyfile"))
    reqs = str(params.get("ssl_cert_reqs", "required")).lower()
    if reqs in ("none", "cert_none"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context.check_hostname = params.get("ssl_check_hostname", True) not in (False, "false")
    return context


class ScriptPipeline:
    """EVALSHA (and a few plain commands) over one lazily opened, pipelined connection.

    `url` (redis://, rediss://, unix://) gives the server, credentials and database; with
    `address`, the server's address is asked of it at each connect instead (Sentinel).
    Creating it does not contact Redis; the first call connects (AUTH and SELECT as the URL
    says), and a call after the connection was lost reconnects. Concurrent first calls share
    one connection attempt. `wait_replicas` > 0 makes durable calls wait for that many
    replicas, `wait_ms` at most.
    """

    def __init__(
        self,
        url: str,
        *,
        socket_timeout: float,
        connect_timeout: float,
        address: AddressSource | None = None,
        wait_replicas: int = 0,
        wait_ms: int = 0,
    ) -> None:
        self._params = parse_url(url)
        tls = url.startswith("rediss://")
        self._ssl = ssl_context(cast(dict[str, Any], self._params)) if tls else None
        self._address = address
        self._timeout = socket_timeout
        self._connect_timeout = connect_timeout
        self._wait = (wait_replicas, wait_ms)
        self._conn: _Connection | None = None
        self._connecting: asyncio.Task[_Connection] | None = None

    async def evalsha(
        self,
        script: LuaScript,
        keys: Sequence[object],
        args: Sequence[object],
        *,
        durable: bool = False,
        asking: bool = False,
    ) -> Any:
        """Run `script` by SHA; on NOSCRIPT (Redis restarted, SCRIPT FLUSH) once by source.
        `asking`: preceded by ASKING (a cluster slot being migrated to this server)."""
        conn = self._conn
        if conn is None or not conn.alive or conn.loop is not asyncio.get_running_loop():
            conn = await self._connection()
        try:
            return await self._run(conn, _command(script.evalsha, keys, args), durable, asking)
        except NoScriptError:
            # EVAL runs the script and caches it, so later EVALSHAs find it again.
            conn = await self._connection()
            return await self._run(conn, _command(script.eval, keys, args), durable, asking)

    async def call(self, *args: object) -> Any:
        """One plain command (CLUSTER SLOTS, a registry write), in the same FIFO."""
        conn = await self._connection()
        return await self._run(conn, command_bytes(*args), False, False)

    async def command(self, key: str, *args: object) -> Any:
        """`call`, with the key it is about (what a cluster routes by)."""
        return await self.call(*args)

    async def _run(self, conn: _Connection, data: bytes, durable: bool, asking: bool) -> Any:
        if asking:
            conn.send(command_bytes("ASKING")).add_done_callback(_consume)
        replicas, wait_ms = self._wait
        if not (durable and replicas > 0):
            reply = await conn.send(data)
        else:
            sent = conn.send(data)
            acks = conn.wait_barrier(replicas, wait_ms)
            reply = await sent
            if not isinstance(reply, Exception):
                acked = await acks
                if isinstance(acked, Exception):
                    raise acked
                if acked < replicas:
                    raise ReplicationTimeout(
                        f"{acked} of {replicas} replicas acknowledged within {wait_ms} ms"
                    )
        if isinstance(reply, Exception):
            if isinstance(reply, ReadOnlyError):
                # A primary demoted to a replica (a failover): reconnect, and ask anew where.
                conn.fail(RedisConnectionError("The server is a replica now"))
            raise reply
        return reply

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
                    if self._address is not None:
                        host, port = await self._address()
                    else:
                        host, port = p.get("host", "localhost"), p.get("port", 6379)
                    await loop.create_connection(lambda: conn, host, port, ssl=self._ssl)
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

    def drop(self) -> None:
        """Fail the calls in flight and reconnect next time (the server is not where it was)."""
        if self._conn is not None:
            self._conn.fail(RedisConnectionError("Connection dropped"))

    async def close(self) -> None:
        task, self._connecting = self._connecting, None
        if task is not None and not task.done():
            task.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.fail(RedisConnectionError("Connection closed"))
