"""What every fake upstream shares: a real aiohttp server on 127.0.0.1 and a free port.

A fake subclasses `FakeServer`, adds its handlers in `routes()` and sets `base_path`; it gets
the request log (`requests`), the scripted replies (`enqueue`), the `disconnects` count,
`start()`/`stop()`, `async with`, `start_in_thread()` and `wait_for_disconnects()`.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, Self, TypeVar

import msgspec
from aiohttp import web

__all__ = ["Disconnect", "Dropped", "FakeServer", "RecordedRequest", "drop", "record"]

RequestT = TypeVar("RequestT")
ReplyT = TypeVar("ReplyT")


@dataclass(frozen=True)
class Disconnect:
    """Close the connection without any answer (after `delay` seconds)."""

    delay: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    json: Any  # the decoded body, or None when it was not JSON
    client_port: int  # the same port on two requests means a reused keep-alive connection
    query: str = ""  # the query string, without its `?`


async def record(request: web.Request, path: str | None = None) -> RecordedRequest:
    """Read `request` into a `RecordedRequest` (`path`: None = `request.path`)."""
    raw = await request.read()
    try:
        decoded: Any = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        decoded = None
    headers = {name.lower(): value for name, value in request.headers.items()}
    peer = request.transport.get_extra_info("peername") if request.transport else None
    port = peer[1] if peer else 0
    return RecordedRequest(
        request.method,
        request.path if path is None else path,
        headers,
        raw,
        decoded,
        port,
        request.query_string,
    )


class Dropped(Exception):
    """We closed the connection on purpose (not a client disconnect)."""


def drop(request: web.Request) -> NoReturn:
    """Close the client's connection and raise `Dropped`."""
    transport = request.transport
    if transport is not None:
        transport.close()
    raise Dropped


class FakeServer(Generic[RequestT, ReplyT]):
    """The server, its script and its records. Start it with `async with` (in the test's loop)
    or `start_in_thread()` (its own loop, for sync tests); `base_url` ends in `base_path`."""

    base_path: str = "/v1"
    hosts: tuple[str, ...] = ("127.0.0.1",)  # one listening socket each, on a free port
    client_max_size: int = 1024**2  # aiohttp's default
    handler_cancellation: bool = True
    thread_name: str = "fake-upstream"

    def __init__(self) -> None:
        self.requests: list[RequestT] = []
        self.disconnects = 0  # requests whose client went away before the answer ended
        self._script: deque[ReplyT] = deque()
        self.bill: Callable[[Any], tuple[int, int]] | None = None
        """The upstream's billing rule, when a test sets one: (input, output) tokens for a
        request's JSON, reported in the default answer's usage instead of its fixed counts."""
        self._runner: web.AppRunner | None = None
        self._ports: tuple[int, ...] = ()

    def routes(self, app: web.Application) -> None:
        """Add the fake's handlers to `app`."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        if not self._ports:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://{self.hosts[0]}:{self._ports[0]}{self.base_path}"

    def enqueue(self, *replies: ReplyT) -> None:
        self._script.extend(replies)

    async def start(self) -> None:
        app = web.Application(client_max_size=self.client_max_size)
        self.routes(app)
        self._runner = web.AppRunner(
            app,
            handler_cancellation=self.handler_cancellation,
            access_log=None,
            shutdown_timeout=0.1,
        )
        await self._runner.setup()
        ports = []
        for host in self.hosts:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((host, 0))
                await web.SockSite(self._runner, sock).start()
            except BaseException:
                sock.close()
                await self.stop()
                raise
            ports.append(sock.getsockname()[1])
        self._ports = tuple(ports)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def start_in_thread(self) -> tuple[str, Callable[[], None]]:
        """Serve from a daemon thread with its own loop; returns `base_url` and `stop()`."""
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        thread = threading.Thread(target=serve, name=self.thread_name, daemon=True)
        thread.start()
        started.wait(10)
        if failure:
            raise failure[0]

        def stop() -> None:
            if thread.is_alive():
                loop.call_soon_threadsafe(loop.stop)
                thread.join(10)

        return self.base_url, stop

    async def wait_for_disconnects(self, count: int = 1, within: float = 2.0) -> None:
        """Until `disconnects >= count`; AssertionError after `within` seconds."""
        deadline = time.monotonic() + within
        while self.disconnects < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"saw {self.disconnects} disconnects, wanted {count}")
            await asyncio.sleep(0.005)
