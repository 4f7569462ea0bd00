"""A real local aiohttp server for the tests of `providers.upstream`, and an `Upstream` for it.

The server records what arrived on the wire (method, path, headers, body, client port) and
answers from a script, so a test states what a call sends, what it returns and which provider
error each failure becomes, without any adapter in between.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from providers.options import HttpOptions
from providers.upstream import Upstream
from tests.fakes.server import RecordedRequest, record

__all__ = ["JSON", "Reply", "Server", "run", "serving"]

JSON = {"Content-Type": "application/json"}


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b'{"ok":true}'
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)
    pause: float = 0.0  # the server waits this long before answering


class Server:
    """`/call` answers from `replies` (then 200 JSON); `/events` streams two events with a
    pause between them; `/stall` never answers; `/token` hands out numbered tokens."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.seen: list[RecordedRequest] = []
        self.tokens = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/call", self.call)
        app.router.add_post("/events", self.events)
        app.router.add_post("/stall", self.stall)
        app.router.add_post("/token", self.token)
        return app

    async def call(self, request: web.Request) -> web.Response:
        await self.record(request)
        reply = self.replies.popleft() if self.replies else Reply()
        if reply.pause:
            await asyncio.sleep(reply.pause)
        return web.Response(
            status=reply.status,
            body=reply.body,
            content_type=reply.content_type,
            headers=reply.headers,
        )

    async def events(self, request: web.Request) -> web.StreamResponse:
        await self.record(request)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: one\n\n")
        await asyncio.sleep(0.5)  # longer than the session's total timeout in the test
        await response.write(b"data: two\n\n")
        await response.write_eof()
        return response

    async def stall(self, request: web.Request) -> web.Response:
        await asyncio.sleep(3600)  # cancelled when the client gives up
        raise AssertionError("unreachable")

    async def token(self, request: web.Request) -> web.Response:
        self.tokens += 1
        return web.Response(text=f"token-{self.tokens}")

    async def record(self, request: web.Request) -> None:
        self.seen.append(await record(request, request.path_qs))


@asynccontextmanager
async def serving(
    headers: Mapping[str, str] = JSON, **settings: Any
) -> AsyncIterator[tuple[Server, HttpOptions, Upstream]]:
    """The server on a free port and an `Upstream` for it (`settings`: its keyword arguments
    and `HttpOptions` fields); both closed after."""
    server = Server()
    keywords = {
        name: settings.pop(name) for name in ("errors", "not_a_stream", "sign") if name in settings
    }
    async with TestServer(server.app(), handler_cancellation=True, shutdown_timeout=0.1) as test:
        options = HttpOptions(base_url=str(test.make_url("")), **settings)
        upstream = Upstream(options, headers, **keywords)
        try:
            yield server, options, upstream
        finally:
            await upstream.close()
