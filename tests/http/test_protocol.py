"""The bounded HTTP protocol fed bytes in reads of the test's choosing: each request head has
its own budget, wherever the reads split a pipeline, and an oversized one is refused after the
requests before it are answered.

A real socket cannot choose where the server's reads split; a transport that records writes
can (uvicorn's own protocol tests do the same). tests/e2e/test_http_edge.py sends pipelines
through real sockets to a real `gateway serve`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from gateway.http.protocol import HttpLimits, bounded_protocol
from tests.support.waiting import wait_until_async

MAX_HEAD = 4096
_STATUS = re.compile(rb"HTTP/1\.1 (\d{3}) ")


class RecordingTransport(asyncio.Transport):
    """Keeps what the protocol writes; closes when told to."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False
        self.eof = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(
            name, default
        )


async def echo(scope: Any, receive: Callable[[], Awaitable[Any]], send: Any) -> None:
    """Answers with the request's X-Request-Id and the size of its body."""
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    request_id = dict(scope["headers"]).get(b"x-request-id", b"").decode()
    body = json.dumps({"id": request_id, "body": size}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def get(request_id: str, head_size: int | None = None) -> bytes:
    """A GET whose whole head (up to its blank line) is `head_size` bytes."""
    head = f"GET /x HTTP/1.1\r\nHost: t\r\nX-Request-Id: {request_id}\r\n"
    if head_size is not None:
        pad = head_size - len(head) - len("X-Pad: \r\n\r\n")
        assert pad >= 0
        head += f"X-Pad: {'p' * pad}\r\n"
    request = (head + "\r\n").encode()
    assert head_size is None or len(request) == head_size
    return request


def post(request_id: str, body: bytes, *, chunked: bool = False) -> bytes:
    head = f"POST /x HTTP/1.1\r\nHost: t\r\nX-Request-Id: {request_id}\r\n"
    if not chunked:
        return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    framed = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:7], body[7:]) if part)
    return (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + framed + b"0\r\n\r\n"


def answers(written: bytes) -> list[tuple[int, dict[str, Any] | None]]:
    """(status, JSON body) of each response in `written`."""
    out: list[tuple[int, dict[str, Any] | None]] = []
    rest = bytes(written)
    while rest:
        head, _, rest = rest.partition(b"\r\n\r\n")
        match = _STATUS.match(head)
        assert match, head[:80]
        length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE)[1])  # type: ignore[index]
        body, rest = rest[:length], rest[length:]
        out.append((int(match[1]), json.loads(body) if body else None))
    return out


def serve(
    reads: Sequence[bytes], expected: int
) -> tuple[list[tuple[int, Any]], RecordingTransport]:
    """Feed `reads` to a fresh connection; wait (bounded) until `expected` answers are out."""

    async def main() -> tuple[list[tuple[int, Any]], RecordingTransport]:
        protocol_class = bounded_protocol(HttpLimits(max_head_bytes=MAX_HEAD, max_headers=20))
        config = Config(
            app=echo, http=protocol_class, lifespan="off", proxy_headers=False, log_config=None
        )
        config.load()
        state = ServerState()
        protocol = protocol_class(config=config, server_state=state, app_state={})
        transport = RecordingTransport()
        protocol.connection_made(transport)
        for data in reads:
            protocol.data_received(data)
            await asyncio.sleep(0)  # a turn of the loop between reads, as between packets
        await wait_until_async(
            lambda: len(_STATUS.findall(bytes(transport.written))) >= expected and not state.tasks,
            seconds=5,
            interval=0.001,
            what=f"{expected} answers written",
        )
        protocol.connection_lost(None)
        return answers(bytes(transport.written)), transport

    return asyncio.run(main())


def ids(out: list[tuple[int, Any]]) -> list[str]:
    return [body["id"] for status, body in out if status == 200]


def test_a_head_of_exactly_the_limit_passes_and_one_byte_more_is_refused() -> None:
    for reads in (
        [get("a", MAX_HEAD)],
        [get("a", MAX_HEAD)[i : i + 100] for i in range(0, MAX_HEAD, 100)],
    ):
        out, _ = serve(reads, 1)
        assert ids(out) == ["a"]
    over = get("b", MAX_HEAD + 1)
    for reads in (
        [over],
        [over[:MAX_HEAD], over[MAX_HEAD:]],
        [over[i : i + 999] for i in range(0, len(over), 999)],
    ):
        out, transport = serve(reads, 1)
        assert [status for status, _ in out] == [431]
        assert out[0][1]["error"]["code"] == "request_headers_too_large"
        assert transport.eof


@pytest.mark.parametrize("count", [40, 200])
def test_many_pipelined_heads_in_one_read_are_all_answered_in_order(count: int) -> None:
    pipeline = b"".join(get(f"r{i}", 1000) for i in range(count))
    assert len(pipeline) > MAX_HEAD
    out, _ = serve([pipeline], count)
    assert ids(out) == [f"r{i}" for i in range(count)]


def test_heads_near_the_limit_pass_wherever_the_reads_split() -> None:
    """Each head's bytes are counted from its own first byte, not from the read's."""
    requests = [
        get("a", 100),
        post("b", b"x" * 3000),
        get("c", MAX_HEAD),
        post("d", b'{"chunked": "body with a blank line\r\n\r\n inside"}', chunked=True),
        get("e", MAX_HEAD),
        get("f", MAX_HEAD),
    ]
    pipeline = b"".join(requests)
    for split in range(0, len(pipeline), 97):
        out, _ = serve([pipeline[:split], pipeline[split:]], len(requests))
        assert ids(out) == list("abcdef"), split
        assert [body["body"] for _, body in out] == [0, 3000, 0, 48, 0, 0]


def test_a_head_over_the_limit_after_a_body_is_refused_wherever_the_reads_split() -> None:
    pipeline = get("a", 200) + post("b", b"y" * 2000) + get("c", MAX_HEAD + 1)
    for split in range(0, len(pipeline), 101):
        out, _ = serve([pipeline[:split], pipeline[split:]], 3)
        assert [status for status, _ in out] == [200, 200, 431], split
        assert ids(out) == ["a", "b"]


def test_an_oversized_pipelined_head_is_answered_after_the_requests_before_it() -> None:
    pipeline = get("a") + get("b") + get("c", 3 * MAX_HEAD) + get("never")
    out, transport = serve([pipeline], 3)
    assert [status for status, _ in out] == [200, 200, 431]
    assert ids(out) == ["a", "b"]
    assert transport.eof  # and nothing after the refusal is parsed


def test_too_many_pipelined_headers_are_refused_in_turn() -> None:
    crowded = "GET /x HTTP/1.1\r\n" + "".join(f"X-H{i}: v\r\n" for i in range(30)) + "\r\n"
    out, _ = serve([get("a") + crowded.encode()], 2)
    assert [status for status, _ in out] == [200, 431]


def test_a_malformed_pipelined_request_is_a_400_after_the_one_before() -> None:
    out, _ = serve([get("a") + b"GET /x HTTP/1.1\r\nHost x\r\n\r\n"], 2)
    assert [status for status, _ in out] == [200, 400]
    assert out[1][1]["error"]["code"] == "invalid_request"
