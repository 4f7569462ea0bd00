"""An answer leaves the bounded protocol with its head and its body's first bytes in one write;
a head whose body does not follow in the same turn of the loop is written at its end; a `100
Continue` and a `HEAD` answer are written at once; a head held when the app fails is written
before the connection closes."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from uvicorn.config import Config
from uvicorn.server import ServerState

from gateway.http.protocol import HttpLimits, bounded_protocol
from tests.http.test_protocol import RecordingTransport
from tests.support.waiting import wait_until_async

App = Callable[[Any, Callable[[], Awaitable[Any]], Any], Awaitable[None]]


class WriteLog(RecordingTransport):
    """Keeps every write apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))
        super().write(data)


async def _drain(receive: Callable[[], Awaitable[Any]]) -> None:
    while (await receive()).get("more_body", False):
        pass


def sized(body: bytes) -> App:
    async def app(scope: Any, receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        await _drain(receive)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


async def chunked(scope: Any, receive: Callable[[], Awaitable[Any]], send: Any) -> None:
    await _drain(receive)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def fails_after_start(scope: Any, receive: Callable[[], Awaitable[Any]], send: Any) -> None:
    await _drain(receive)
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]}
    )
    raise RuntimeError("the app fails before its body")


def connected(app: App) -> tuple[Any, ServerState, WriteLog]:
    """A fresh connection of the bounded protocol serving `app`: (protocol, its server state,
    the transport that logs its writes). Call it inside a running loop."""
    protocol_class = bounded_protocol(HttpLimits())
    config = Config(
        app=app, http=protocol_class, lifespan="off", proxy_headers=False, log_config=None
    )
    config.load()
    state = ServerState()
    protocol = protocol_class(config=config, server_state=state, app_state={})
    transport = WriteLog()
    protocol.connection_made(transport)
    return protocol, state, transport


def serve(app: App, request: bytes, *, until: bytes, times: int = 1) -> WriteLog:
    """`request` to a fresh connection of the bounded protocol serving `app`; the writes once
    `until` was written `times`."""

    async def main() -> WriteLog:
        protocol, state, transport = connected(app)
        protocol.data_received(request)
        await wait_until_async(
            lambda: bytes(transport.written).count(until) >= times and not state.tasks,
            seconds=5,
            interval=0.001,
            what="the answer written",
        )
        protocol.connection_lost(None)
        return transport

    return asyncio.run(main())


def test_an_answer_of_known_length_is_one_write() -> None:
    transport = serve(sized(b'{"ok":true}'), b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n", until=b"true}")
    assert len(transport.writes) == 1
    head, _, body = transport.writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"content-length: 11" in head
    assert body == b'{"ok":true}'


def test_keep_alive_answers_are_one_write_each() -> None:
    request = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"
    transport = serve(sized(b"{}"), request * 3, until=b"\r\n\r\n{}", times=3)
    assert len(transport.writes) == 3
    assert all(
        w.startswith(b"HTTP/1.1 200 OK") and w.endswith(b"\r\n\r\n{}") for w in transport.writes
    )


def test_an_empty_answer_of_known_length_is_one_write() -> None:
    transport = serve(sized(b""), b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n", until=b"length: 0\r\n\r\n")
    assert len(transport.writes) == 1
    assert transport.writes[0].endswith(b"content-length: 0\r\n\r\n")


def test_a_chunked_answers_head_goes_with_its_first_chunk() -> None:
    transport = serve(chunked, b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n", until=b"0\r\n\r\n")
    head, _, first = transport.writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert head.endswith(b"transfer-encoding: chunked")
    assert first == b"9\r\ndata: 1\n\n\r\n"
    assert transport.writes[1:] == [b"0\r\n\r\n"]


async def slow_first_chunk(scope: Any, receive: Callable[[], Awaitable[Any]], send: Any) -> None:
    await _drain(receive)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await asyncio.sleep(0.05)  # the first event is not there yet
    await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": False})


def test_a_head_whose_body_is_not_ready_is_written_at_the_end_of_its_turn() -> None:
    transport = serve(slow_first_chunk, b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n", until=b"0\r\n\r\n")
    assert transport.writes[0].startswith(b"HTTP/1.1 200 OK")
    assert transport.writes[0].endswith(b"transfer-encoding: chunked\r\n\r\n")
    assert transport.writes[1:] == [b"9\r\ndata: 1\n\n\r\n0\r\n\r\n"]


def test_a_head_answer_is_written_though_no_body_follows() -> None:
    transport = serve(sized(b"abc"), b"HEAD /x HTTP/1.1\r\nHost: t\r\n\r\n", until=b"\r\n\r\n")
    assert len(transport.writes) == 1
    assert transport.writes[0].startswith(b"HTTP/1.1 200 OK")
    assert transport.writes[0].endswith(b"content-length: 3\r\n\r\n")


def test_100_continue_is_written_before_the_body_is_read() -> None:
    request = b"POST /x HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"

    async def main() -> WriteLog:
        protocol, state, transport = connected(sized(b"{}"))
        protocol.data_received(request)
        await wait_until_async(
            lambda: bool(transport.writes), seconds=5, interval=0.001, what="100 Continue"
        )
        assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
        protocol.data_received(b"{}")
        await wait_until_async(
            lambda: len(transport.writes) == 2 and not state.tasks,
            seconds=5,
            interval=0.001,
            what="the answer",
        )
        protocol.connection_lost(None)
        return transport

    transport = asyncio.run(main())
    assert transport.writes[1].startswith(b"HTTP/1.1 200 OK")
    assert transport.writes[1].endswith(b"\r\n\r\n{}")


def test_a_held_head_is_written_before_the_close_when_the_app_fails() -> None:
    transport = serve(fails_after_start, b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n", until=b"\r\n\r\n")
    assert transport.closed
    assert len(transport.writes) == 1
    assert transport.writes[0].startswith(b"HTTP/1.1 200 OK")
    assert transport.writes[0].endswith(b"content-length: 5\r\n\r\n")


def test_an_answered_request_is_freed_without_the_garbage_collector() -> None:
    """Nothing of a request's outlives it in a reference cycle, which only the collector frees
    (each one it must find costs CPU on every request)."""
    request = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"

    async def main() -> None:
        protocol, state, transport = connected(sized(b"{}"))
        protocol.data_received(request)
        await wait_until_async(
            lambda: len(transport.writes) == 1 and not state.tasks,
            seconds=5,
            interval=0.001,
            what="the first answer",
        )
        first = weakref.ref(protocol.cycle)
        protocol.data_received(request)  # the connection moves on to the next request
        await wait_until_async(
            lambda: len(transport.writes) == 2 and not state.tasks,
            seconds=5,
            interval=0.001,
            what="the second answer",
        )
        assert first() is None
        protocol.connection_lost(None)

    gc.collect()
    gc.disable()
    try:
        asyncio.run(main())
    finally:
        gc.enable()
