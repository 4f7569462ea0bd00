"""The upstream client's pool, headers, timeouts and transport-error mapping against a real
local aiohttp server.

The server answers properly, or stalls, drops the connection, cuts its body short, or writes
bytes that are not HTTP, by taking over the socket. Each failure must come out of
`except TRANSPORT_ERRORS: raise transport_error(exc) from exc` as the right provider error,
with the client's exception as its cause.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

from providers.errors import ProviderError, UpstreamTimeout, UpstreamUnavailable
from providers.http import (
    TRANSPORT_ERRORS,
    call_timeouts,
    merged_headers,
    read_body,
    stream_timeouts,
    transport_error,
)
from providers.http1 import (
    BadAnswer,
    BrokenBody,
    Client,
    ConnectFailed,
    Disconnected,
    Response,
    Timeouts,
    TLSFailed,
)
from providers.options import HttpOptions


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


class Upstream:
    """Routes for every way an upstream can answer; records what it saw."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most_in_flight = 0
        self.client_ports: list[int] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/echo", self.echo)
        app.router.add_get("/slow", self.slow)
        app.router.add_get("/stall", self.stall)
        app.router.add_get("/stall-body", self.stall_body)
        app.router.add_get("/drop", self.raw(b""))
        app.router.add_get("/garbage", self.raw(b"NOT HTTP AT ALL\r\n\r\n"))
        app.router.add_get(
            "/truncated", self.raw(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
        )
        return app

    async def echo(self, request: web.Request) -> web.Response:
        headers = [[name.lower(), value] for name, value in request.headers.items()]
        return web.json_response(headers)

    async def slow(self, request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.client_ports.append(peer[1] if peer else 0)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.05)  # a slow upstream: calls overlap
        finally:
            self.in_flight -= 1
        return web.Response(text="ok")

    async def stall(self, request: web.Request) -> web.Response:
        await asyncio.sleep(3600)  # cancelled when the client gives up
        raise AssertionError("unreachable")

    async def stall_body(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: first\n\n")
        await asyncio.sleep(3600)  # a stream that stalls after its first event
        raise AssertionError("unreachable")

    @staticmethod
    def raw(data: bytes) -> Callable[[web.Request], Coroutine[Any, Any, web.Response]]:
        """A handler that writes `data` straight to the socket and closes it."""

        async def handler(request: web.Request) -> web.Response:
            transport = request.transport
            assert transport is not None
            transport.write(data)
            transport.close()
            await asyncio.sleep(3600)  # cancelled by the closed connection
            raise AssertionError("unreachable")

        return handler


class Session:
    """A client set up from options as `providers.upstream` sets it up."""

    def __init__(self, options: HttpOptions, headers: dict[str, str]) -> None:
        self.client = Client(
            merged_headers(options, headers),
            max_connections=options.max_connections,
            connect_timeout=options.connect_timeout_seconds,
        )
        self.timeouts = call_timeouts(options)

    async def get(self, url: str, timeouts: Timeouts | None = None) -> Response:
        return await self.client.request("GET", URL(url), b"", timeouts or self.timeouts)

    async def close(self) -> None:
        await self.client.close()


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[tuple[Upstream, str, Session]]:
    """The upstream on a free port, and a client for it set up the shared way; both closed."""
    upstream = Upstream()
    server = TestServer(upstream.app(), handler_cancellation=True, shutdown_timeout=0.1)
    await server.start_server()
    base_url = str(server.make_url(""))
    session = Session(HttpOptions(base_url=base_url, **options), {"Accept": "*/*"})
    try:
        yield upstream, base_url, session
    finally:
        await session.close()
        await server.close()


async def fetch(session: Session, url: str) -> bytes:
    """What an adapter does at the boundary."""
    try:
        response = await session.get(url)
        try:
            return await read_body(response, 1_000_000)
        finally:
            response.release()
    except TRANSPORT_ERRORS as exc:
        raise transport_error(exc) from exc


def test_the_session_sends_the_adapter_headers_and_extra_headers_win() -> None:
    async def test() -> None:
        upstream = Upstream()
        async with TestServer(upstream.app()) as server:
            options = HttpOptions(
                base_url=str(server.make_url("")),
                extra_headers={"content-type": "text/x-override", "OpenAI-Organization": "org"},
            )
            adapter_headers = {"Content-Type": "application/json", "Authorization": "Bearer k"}
            session = Session(options, adapter_headers)
            try:
                seen: list[list[str]] = json.loads(await fetch(session, str(options.url("/echo"))))
            finally:
                await session.close()
            assert ["authorization", "Bearer k"] in seen
            assert ["openai-organization", "org"] in seen
            assert [value for name, value in seen if name == "content-type"] == ["text/x-override"]
            assert adapter_headers["Content-Type"] == "application/json"  # not mutated

    run(test)


def test_the_session_ignores_proxies_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")

    async def test() -> None:
        async with serving() as (_, base_url, session):
            assert await fetch(session, base_url + "/slow") == b"ok"

    run(test)


def test_the_pool_holds_max_connections_and_reuses_them() -> None:
    async def test() -> None:
        async with serving(max_connections=1) as (upstream, base_url, session):
            bodies = await asyncio.gather(*(fetch(session, base_url + "/slow") for _ in range(3)))
            assert bodies == [b"ok"] * 3
            assert upstream.most_in_flight == 1
            assert len(set(upstream.client_ports)) == 1  # one keep-alive connection

    run(test)


def test_a_stalled_answer_is_a_timeout() -> None:
    async def test() -> None:
        async with serving(timeout_seconds=0.2) as (_, base_url, session):
            with pytest.raises(UpstreamTimeout) as caught:
                await fetch(session, base_url + "/stall")
            assert isinstance(caught.value.__cause__, TimeoutError)

    run(test)


def test_a_stalled_stream_read_is_a_timeout() -> None:
    async def test() -> None:
        options: dict[str, Any] = {"timeout_seconds": 0.2, "stream_read_timeout_seconds": 0.3}
        async with serving(**options) as (_, base_url, session):
            timeout = stream_timeouts(HttpOptions(base_url=base_url, **options))
            assert (timeout.total, timeout.read) == (None, 0.3)
            response = await session.get(base_url + "/stall-body", timeout)
            try:
                # Longer than timeout_seconds: a stream has no total, only a per-read limit.
                await asyncio.sleep(0.25)
                assert await response.read_chunk() == b"data: first\n\n"
                with pytest.raises(UpstreamTimeout) as caught:
                    try:
                        await response.read_chunk()
                    except TRANSPORT_ERRORS as exc:
                        raise transport_error(exc) from exc
                assert isinstance(caught.value.__cause__, TimeoutError)
            finally:
                response.close()

    run(test)


@pytest.mark.parametrize(
    ("path", "cause", "message"),
    [
        ("/drop", Disconnected, "closed the connection before answering"),
        ("/garbage", BadAnswer, "not valid HTTP"),
        ("/truncated", BrokenBody, "broke off its answer"),
    ],
)
def test_broken_answers_are_provider_errors(
    path: str, cause: type[Exception], message: str
) -> None:
    async def test() -> None:
        async with serving() as (_, base_url, session):
            with pytest.raises(ProviderError, match=message) as caught:
                await fetch(session, base_url + path)
            assert type(caught.value) is ProviderError
            assert isinstance(caught.value.__cause__, cause)
            assert caught.value.upstream_status is None
            assert await fetch(session, base_url + "/slow") == b"ok"  # the pool recovers

    run(test)


def test_refused_connection_is_unavailable() -> None:
    async def test() -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        base_url = f"http://127.0.0.1:{port}"
        session = Session(HttpOptions(base_url=base_url), {})
        try:
            with pytest.raises(UpstreamUnavailable) as caught:
                await fetch(session, base_url + "/slow")
            assert isinstance(caught.value.__cause__, ConnectFailed)
        finally:
            await session.close()

    run(test)


def test_tls_to_a_plain_http_server_is_a_provider_error() -> None:
    async def test() -> None:
        async with serving() as (_, base_url, session):
            with pytest.raises(ProviderError, match="TLS") as caught:
                await fetch(session, base_url.replace("http://", "https://") + "/slow")
            assert type(caught.value) is ProviderError
            assert isinstance(caught.value.__cause__, TLSFailed)

    run(test)


@pytest.mark.parametrize(
    ("exc", "error"),
    [
        (TimeoutError(), UpstreamTimeout),
        (aiohttp.SocketTimeoutError(), UpstreamTimeout),
        (aiohttp.ConnectionTimeoutError(), UpstreamTimeout),
        (ConnectionResetError("reset"), ProviderError),
        (aiohttp.ClientOSError(104, "reset"), ProviderError),
        (aiohttp.InvalidURL("nope"), ProviderError),
        (Disconnected("closed"), ProviderError),
        (ConnectFailed("refused"), UpstreamUnavailable),
    ],
)
def test_transport_error_for_other_exceptions(exc: Exception, error: type[ProviderError]) -> None:
    assert isinstance(exc, TRANSPORT_ERRORS)
    assert type(transport_error(exc)) is error


@pytest.mark.parametrize("path", ["/big-chunked", "/big-sized", "/small-chunked"])
def test_read_body_refuses_an_answer_past_its_bound(path: str) -> None:
    """An answer over the bound fails at the bound (chunked or sized), the rest unread; one
    within it is read whole either way."""

    async def test() -> None:
        sent: list[int] = []

        async def chunked(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            count = 2 if request.path == "/small-chunked" else 1000
            try:
                for _ in range(count):
                    await response.write(b"x" * 65536)
                    sent.append(1)
            except (ConnectionError, asyncio.CancelledError):
                pass
            return response

        async def sized(request: web.Request) -> web.Response:
            return web.Response(body=b"y" * 1_000_000)

        app = web.Application()
        app.router.add_get("/big-chunked", chunked)
        app.router.add_get("/small-chunked", chunked)
        app.router.add_get("/big-sized", sized)
        async with TestServer(app, handler_cancellation=True, shutdown_timeout=0.1) as server:
            client = Client({}, max_connections=1, connect_timeout=5.0)
            response = await client.request("GET", server.make_url(path), b"", Timeouts(total=30))
            try:
                if path == "/small-chunked":
                    assert await read_body(response, 200_000) == b"x" * 131072
                    return
                with pytest.raises(ProviderError, match="over 200000 bytes"):
                    await read_body(response, 200_000)
            finally:
                response.release()
                await client.close()
        assert len(sent) < 1000, "the whole answer was read"

    run(test)
