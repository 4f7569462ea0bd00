"""A pooled keep-alive HTTP/1.1 client for JSON and event-stream upstreams, on httptools'
parser: what the adapters need and no more, at a fraction of a general client's CPU per call.

    client = Client(headers, max_connections=100, connect_timeout=5.0)  # used in one loop
    response = await client.request("POST", url, body, Timeouts(total=60.0))
    response.status, response.headers, response.content_type
    await response.read_chunk()       # the bytes received so far, b"" at the body's end
    response.release()                # back to the pool when read to its end, else closed
    response.close()                  # closed: the upstream sees the disconnect
    await client.close()

Timeouts per phase (`Timeouts`): `pool` bounds waiting for a free connection, `connect` opening
a TCP/TLS connection (the client's default unless the call sets it), `read` each wait for more
bytes (a stream's), `total` the whole call from the wait for a connection to the body's last
byte. Idle connections are kept
`KEEP_ALIVE` seconds. TLS verifies against the system's roots and certifi's; no proxy is
taken from the environment. A request whose connection closes before any answer is sent once
more on a new connection when its method is idempotent (as aiohttp does, RFC 9112 9.3.1): a
POST is never sent twice.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Awaitable, Mapping

import certifi
import msgspec
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from providers.http1.connection import Connection
from providers.http1.errors import ConnectFailed, Disconnected, TLSFailed

__all__ = ["IDEMPOTENT", "KEEP_ALIVE", "Client", "Response", "Timeouts", "default_tls"]

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
KEEP_ALIVE = 15.0
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_DEFAULTS = {"Accept": "*/*", "User-Agent": "generation-gateway"}

Origin = tuple[str, str, int]


class Timeouts(msgspec.Struct, frozen=True):
    """Seconds per phase of one call; None is unbounded (`connect` None: the client's)."""

    total: float | None = None
    pool: float | None = None
    connect: float | None = None
    read: float | None = None


@functools.cache
def default_tls() -> ssl.SSLContext:
    """Verifies against the system's roots (and `SSL_CERT_FILE`) and certifi's bundle."""
    context = ssl.create_default_context()
    context.load_verify_locations(certifi.where())
    context.set_alpn_protocols(["http/1.1"])
    return context


def _header_lines(headers: Mapping[str, str]) -> str:
    for name, value in headers.items():
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value or ":" in name:
            raise ValueError(f"header {name!r} has a line break or a colon in it")
    return "".join(f"{name}: {value}\r\n" for name, value in headers.items())


class Response:
    """The status and headers of an answer, its body read with `read_chunk`; always end it with
    `release()` or `close()` (both safe twice)."""

    __slots__ = ("_client", "_connection", "_origin", "_raw", "content_type_raw", "status")

    def __init__(self, client: Client, connection: Connection, origin: Origin) -> None:
        self._client = client
        self._connection: Connection | None = connection
        self._origin = origin
        self._raw = connection.raw_headers
        self.content_type_raw = connection.content_type
        self.status = connection.status

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return CIMultiDictProxy(
            CIMultiDict((n.decode("latin-1"), v.decode("latin-1")) for n, v in self._raw)
        )

    @property
    def content_type(self) -> str:
        """The media type, lower case, without parameters ("application/octet-stream" if
        none is given), as aiohttp reports it."""
        raw = self.content_type_raw
        if not raw:
            return "application/octet-stream"
        return raw.split(b";", 1)[0].strip().lower().decode("latin-1")

    def read_chunk(self) -> Awaitable[bytes]:
        """The body's bytes received so far (at least one), or b"" at its end (the
        connection's own coroutine: no frame of this one per read)."""
        connection = self._connection
        if connection is None:
            return _nothing()
        return connection.chunk()

    def at_eof(self) -> bool:
        """The body was read to its end."""
        connection = self._connection
        return connection is None or (connection.body_done and not connection.has_chunks())

    def release(self) -> None:
        """Back to the pool if the body was read to its end, else closed."""
        connection = self._connection
        if connection is not None:
            self._connection = None
            self._client.done(connection, self._origin)

    def close(self) -> None:
        connection = self._connection
        if connection is not None:
            self._connection = None
            connection.close()
            self._client.done(connection, self._origin)


class Client:
    """Keep-alive connections to any origin, at most `max_connections` in use at once."""

    __slots__ = ("_closed", "_connect", "_headers", "_idle", "_lines", "_loop", "_slots", "_tls")

    def __init__(
        self,
        headers: Mapping[str, str],
        *,
        max_connections: int,
        connect_timeout: float | None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the first call
        sent = {k: v for k, v in _DEFAULTS.items() if k.lower() not in _lower(headers)}
        sent.update(headers)
        self._headers = sent
        self._lines = _header_lines(sent)
        self._idle: dict[Origin, list[Connection]] = {}
        self._slots = asyncio.Semaphore(max_connections)
        self._connect = connect_timeout
        self._tls = tls
        self._closed = False

    async def request(
        self,
        method: str,
        url: URL,
        body: bytes,
        timeouts: Timeouts,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Send; the answer once its status and headers are in (the body is read from it)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        total = timeouts.total
        deadline = None if total is None else loop.time() + total
        slots = self._slots
        if slots.locked():
            wait = deadline
            if timeouts.pool is not None:
                until = loop.time() + timeouts.pool
                wait = until if wait is None else min(wait, until)
            async with asyncio.timeout_at(wait):
                await slots.acquire()
        else:
            await slots.acquire()
        try:
            data = self._head(method, url, body, headers)
            origin = (url.scheme, url.raw_host or "", url.port or 0)
            retry = method in IDEMPOTENT
            while True:
                connection = self._pooled(origin)
                if connection is None:
                    connection = await self._open(origin, timeouts.connect, deadline)
                connection.send(data, body)
                connection.watch(deadline, timeouts.read)
                try:
                    await connection.head()
                except Disconnected:
                    connection.finish()
                    connection.close()
                    if retry:
                        retry = False
                        continue
                    raise
                except BaseException:
                    connection.finish()
                    connection.close()
                    raise
                return Response(self, connection, origin)
        except BaseException:
            slots.release()
            raise

    def done(self, connection: Connection, origin: Origin) -> None:
        """The end of an answer: its connection pooled (read to its end) or closed."""
        connection.finish()
        if connection.reusable() and not self._closed:
            connection.idle_since = connection.loop_time()
            self._idle.setdefault(origin, []).append(connection)
        else:
            connection.close()
        self._slots.release()

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        self._closed = True
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()

    def _head(self, method: str, url: URL, body: bytes, headers: Mapping[str, str] | None) -> bytes:
        lines = self._lines
        if headers:
            names = _lower(headers)
            kept = {k: v for k, v in self._headers.items() if k.lower() not in names}
            kept.update(headers)
            lines = _header_lines(kept)
        length = f"Content-Length: {len(body)}\r\n" if body or method in _BODY_METHODS else ""
        return (
            f"{method} {url.raw_path_qs} HTTP/1.1\r\nHost: {url.host_port_subcomponent}\r\n"
            f"{lines}{length}\r\n"
        ).encode()

    def _pooled(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        stale_before = idle[-1].loop_time() - KEEP_ALIVE
        while idle:
            connection = idle.pop()
            if connection.usable() and connection.idle_since > stale_before:
                return connection
            connection.close()
        return None

    async def _open(
        self, origin: Origin, connect: float | None, deadline: float | None
    ) -> Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = None
        if scheme == "https":
            tls = self._tls or default_tls()
        limit = self._connect if connect is None else connect
        at = None if limit is None else loop.time() + limit
        if deadline is not None and (at is None or deadline < at):
            at = deadline
        try:
            async with asyncio.timeout_at(at):
                _, connection = await loop.create_connection(
                    lambda: Connection(loop),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                )
        except ssl.SSLError as exc:
            raise TLSFailed(f"TLS with {host}:{port} failed: {exc}") from exc
        except ssl.CertificateError as exc:
            raise TLSFailed(f"TLS with {host}:{port} failed: {exc}") from exc
        except TimeoutError:
            raise TimeoutError(f"connecting to {host}:{port} took too long") from None
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {host}:{port}: {exc}") from exc
        return connection


async def _nothing() -> bytes:
    return b""


def _lower(headers: Mapping[str, str]) -> set[str]:
    return {name.lower() for name in headers}
