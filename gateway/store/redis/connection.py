"""One pipelined RESP connection to one Redis server, and how it is (re)opened.

`PipelinedConnection` is a socket whose replies, which Redis sends in the order it received the
requests, resolve the waiting futures in FIFO order as the C parser (`hiredis.Reader`) yields
them; the requests of one turn of the event loop go out in one write. `Dialer` opens one
(TCP, TLS or a unix socket; AUTH and SELECT as the URL says; behind Sentinel the address asked
anew at each connect). `Lane` keeps one open, lazily: the first call connects, a call after
the connection was lost reconnects, concurrent callers share one attempt.

Failures look as they do with redis-py, so the store maps them unchanged: error replies become
redis-py's exception classes (its own `parse_error`), a lost connection `ConnectionError` for
every pending call, a reply later than `socket_timeout` `TimeoutError`. A timed-out connection
is closed, as its FIFO can no longer be trusted; the next call reconnects. Nothing is resent.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, cast

import hiredis
from redis._parsers.base import BaseParser
from redis.asyncio.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, InvalidResponse
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = [
    "Address",
    "AddressSource",
    "Dialer",
    "Lane",
    "PipelinedConnection",
    "command_bytes",
    "consume",
    "encode",
]

_SLACK = 0.001
"""A timer may fire a clock tick before its deadline; the watchdog then counts it as due."""

Address = tuple[str, int]
AddressSource = Callable[[], Awaitable[Address]]
"""Where the server is now (asked at each connect; Sentinel's answer after a failover). It
bounds its own wait (the sentinels' timeouts), apart from the connect's."""


def bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def encode(value: object) -> bytes:
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


def command_bytes(*args: object) -> bytes:
    """Any command as RESP (`command_bytes("ZADD", key, 0, member)`)."""
    return b"*%d\r\n" % len(args) + b"".join(bulk(encode(a)) for a in args)


_reply_error: Callable[[str], Exception] = BaseParser.parse_error
"""redis-py's own mapping of an error reply to an exception (NOSCRIPT, MOVED, LOADING, ...)."""


def consume(future: asyncio.Future[Any]) -> None:
    """A future whose callers all gave up: read its outcome so that asyncio does not warn."""
    if not future.cancelled():
        future.exception()


class PipelinedConnection(asyncio.Protocol):
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
        self.outgoing: list[bytes] = []
        """The requests of this turn of the loop, written together at its end (one send)."""

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
        if not self.outgoing:
            self.loop.call_soon(self._write)
        self.outgoing.append(data)
        if self.watchdog is None:
            self.watchdog = self.loop.call_later(self.timeout, self._check)
        return future

    def _write(self) -> None:
        outgoing, self.outgoing = self.outgoing, []
        if self.alive and self.transport is not None:  # else `fail` has failed their calls
            self.transport.write(outgoing[0] if len(outgoing) == 1 else b"".join(outgoing))

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
            barrier.add_done_callback(consume)
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


class Dialer:
    """Opens connections to the server a URL (redis://, rediss://, unix://) names, or, with
    `address`, to the one it says at each connect (Sentinel), with the URL's credentials."""

    def __init__(
        self,
        url: str,
        *,
        socket_timeout: float,
        connect_timeout: float,
        address: AddressSource | None = None,
    ) -> None:
        self._params = parse_url(url)
        tls = url.startswith("rediss://")
        self._ssl = ssl_context(cast(dict[str, Any], self._params)) if tls else None
        self._address = address
        self.timeout = socket_timeout
        self._connect_timeout = connect_timeout

    async def open(self, loop: asyncio.AbstractEventLoop) -> PipelinedConnection:
        p = self._params
        conn = PipelinedConnection(loop, self.timeout)
        try:
            if "path" in p:
                async with asyncio.timeout(self._connect_timeout):
                    await loop.create_unix_connection(lambda: conn, p["path"])
            else:
                if self._address is not None:
                    host, port = await self._address()  # bounded by the sentinels' timeouts
                else:
                    host, port = p.get("host", "localhost"), p.get("port", 6379)
                async with asyncio.timeout(self._connect_timeout):
                    await loop.create_connection(lambda: conn, host, port, ssl=self._ssl)
        except TimeoutError as exc:
            raise RedisTimeoutError("Timeout connecting to Redis") from exc
        except OSError as exc:
            raise RedisConnectionError(f"Error connecting to Redis: {exc}") from exc
        try:
            if "password" in p:
                user = (bulk(p["username"].encode()),) if "username" in p else ()
                auth = (bulk(b"AUTH"), *user, bulk(p["password"].encode()))
                await conn.call(b"*%d\r\n%b" % (len(auth), b"".join(auth)))
            if p.get("db"):
                await conn.call(b"*2\r\n$6\r\nSELECT\r\n" + bulk(b"%d" % p["db"]))
        except BaseException:
            conn.fail(RedisConnectionError("Connection setup failed"))
            raise
        return conn


class Lane:
    """One lazily opened connection of a `Dialer`'s: `get()` returns it open, connecting (once
    for all concurrent callers) when there is none or it was lost. `on_connect` is told of each
    new connection."""

    def __init__(self, dialer: Dialer, on_connect: Callable[[], None] | None = None) -> None:
        self._dialer = dialer
        self._on_connect = on_connect
        self.conn: PipelinedConnection | None = None
        self._connecting: asyncio.Task[PipelinedConnection] | None = None

    def ready(self) -> PipelinedConnection | None:
        """The open connection of the running loop, if there is one (no waiting)."""
        conn = self.conn
        if conn is not None and conn.alive and conn.loop is asyncio.get_running_loop():
            return conn
        return None

    async def get(self) -> PipelinedConnection:
        loop = asyncio.get_running_loop()
        conn = self.conn
        if conn is not None and conn.alive and conn.loop is loop:
            return conn
        task = self._connecting
        if task is None or task.get_loop() is not loop:
            task = self._connecting = loop.create_task(self._connect(loop))
            task.add_done_callback(self._connected)
        # Shielded: a cancelled caller must not cancel the attempt the others wait on.
        return await asyncio.shield(task)

    def _connected(self, task: asyncio.Task[PipelinedConnection]) -> None:
        if self._connecting is task:
            self._connecting = None

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> PipelinedConnection:
        if self.conn is not None:
            self.conn.fail(RedisConnectionError("Connection replaced"))
            self.conn = None
        conn = await self._dialer.open(loop)
        self.conn = conn
        if self._on_connect is not None:
            self._on_connect()
        return conn

    def drop(self, reason: str) -> None:
        """Fail the calls in flight; the next `get()` reconnects."""
        if self.conn is not None:
            self.conn.fail(RedisConnectionError(reason))

    def close(self) -> None:
        task, self._connecting = self._connecting, None
        if task is not None and not task.done():
            task.cancel()
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.fail(RedisConnectionError("Connection closed"))
