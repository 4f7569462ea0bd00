"""Real local servers for the fetcher tests: an aiohttp app that records every request it
sees, and a bare TCP sentinel that counts connections, to prove a refusal sent no byte."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.typedefs import Handler

__all__ = ["HttpServer", "Sentinel", "sentinel", "serve"]


@dataclass
class HttpServer:
    host: str
    port: int
    seen: list[web.Request] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    """Handlers that hang wait on this; set when the server stops."""

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"


@contextlib.asynccontextmanager
async def serve(
    routes: Callable[[HttpServer], list[web.RouteDef]], host: str = "127.0.0.1"
) -> AsyncIterator[HttpServer]:
    """An aiohttp app on a free port of `host`; `routes` gets the server (for its url/seen)."""
    server = HttpServer(host=host, port=0)

    @web.middleware
    async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
        server.seen.append(request)
        return await handler(request)

    app = web.Application(middlewares=[record])
    app.add_routes(routes(server))
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        server.release.set()
        await runner.cleanup()


@dataclass
class Sentinel:
    port: int
    connections: int = 0


@contextlib.asynccontextmanager
async def sentinel(host: str = "127.0.0.1") -> AsyncIterator[Sentinel]:
    """A TCP listener that only counts connections: any byte sent would need one."""
    state = Sentinel(port=0)

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        writer.close()

    tcp = await asyncio.start_server(accept, host, 0)
    state.port = tcp.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        await asyncio.sleep(0.05)  # let any accept already queued be counted
        tcp.close()
        await tcp.wait_closed()
