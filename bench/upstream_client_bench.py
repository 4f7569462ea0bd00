#!/usr/bin/env python3
"""CPU per request of candidate upstream HTTP clients, side by side, against the mock upstream.

Starts `mock_upstream.py` on a free port, then in this one process (uvloop) runs, round after
round with the order rotated each round, `--requests` POSTs per candidate at `--concurrency`:
a JSON chat answer read whole, and an SSE answer (`--stream-chunks` events, chunked) read to its
end chunk by chunk. Prints the median client CPU (user + system of this process) per request
of each candidate, and the mock's own CPU per request as the yardstick.

    .venv/bin/python bench/upstream_client_bench.py --rounds 5 --requests 2000
    EXTRA_PATH=/tmp/pkgs .venv/bin/python bench/upstream_client_bench.py  # pip --target /tmp/pkgs

A candidate whose package is missing is skipped with a note. `lean` is the floor: a bare
keep-alive client on httptools (no timeouts, no TLS, no retry); `http1` is `providers.http1`
alone; `project` is `providers.upstream.Upstream` in this tree (whatever client it is on),
called the way adapters call it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

if os.environ.get("EXTRA_PATH"):
    sys.path[:0] = os.environ["EXTRA_PATH"].split(os.pathsep)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

JSON_BODY = b'{"model":"bench-model","messages":[{"role":"user","content":"Say hello."}]}'
SSE_BODY = (
    b'{"model":"bench-model","stream":true,"stream_options":{"include_usage":true},'
    b'"messages":[{"role":"user","content":"Say hello."}]}'
)
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}

Call = Callable[[bytes, bool], Awaitable[int]]  # (body, streamed) -> bytes read
NOTES: dict[str, int] = {}  # what a candidate got wrong, counted


def _note(what: str) -> None:
    NOTES[what] = NOTES.get(what, 0) + 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _aiohttp(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    import aiohttp

    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=100, limit_per_host=0),
        headers=HEADERS,
        timeout=aiohttp.ClientTimeout(total=60, sock_connect=10),
        trust_env=False,
    )

    async def call(body: bytes, streamed: bool) -> int:
        response = await session.request("POST", url, data=body)
        try:
            if not streamed:
                return len(await response.read())
            size = 0
            async for chunk in response.content.iter_any():
                size += len(chunk)
            return size
        finally:
            response.release()

    return call, session.close


async def _pyreqwest(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from datetime import timedelta

    from pyreqwest.client import ClientBuilder
    from pyreqwest.exceptions import ConnectError

    client = (
        ClientBuilder()
        .default_headers(HEADERS)
        .max_connections(100)
        .timeout(timedelta(seconds=60))
        .connect_timeout(timedelta(seconds=10))
        .no_proxy()
        .build()
    )

    async def call(body: bytes, streamed: bool) -> int:
        try:
            return await once(body, streamed)
        except ConnectError:  # a pooled connection the mock closed while idle
            _note("pyreqwest: requests failed on a connection closed while idle")
            return await once(body, streamed)

    async def once(body: bytes, streamed: bool) -> int:
        if not streamed:
            response = await client.post(url).body_bytes(body).build().send()
            return len(await response.bytes())
        size = 0
        async with client.post(url).body_bytes(body).build_streamed() as response:
            reader = response.body_reader
            while (chunk := await reader.read_chunk()) is not None:
                size += len(chunk)
        return size

    return call, client.close


async def _aiosonic(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    import aiosonic
    from aiosonic.exceptions import ConnectionDisconnected

    client = aiosonic.HTTPClient()

    async def call(body: bytes, streamed: bool) -> int:
        try:
            response = await client.post(url, data=body, headers=HEADERS)
        except ConnectionDisconnected:  # a pooled connection the mock closed while idle
            _note("aiosonic: requests failed on a connection closed while idle")
            response = await client.post(url, data=body, headers=HEADERS)
        if not streamed:
            return len(await response.content())
        size = 0
        async for chunk in response.read_chunks():
            size += len(chunk)
        return size

    async def close() -> None:
        await client.connector.cleanup()

    return call, close


async def _lean(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    """A bare keep-alive HTTP/1.1 client on httptools' parser: the floor a hand-written
    client could reach (no timeouts, no TLS, no retry)."""
    import httptools
    from yarl import URL

    target = URL(url)
    head = (
        f"POST {target.raw_path_qs} HTTP/1.1\r\nHost: {target.host}:{target.port}\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
    ).encode()
    loop = asyncio.get_running_loop()
    idle: list[Conn] = []

    class Conn(asyncio.Protocol):
        def __init__(self) -> None:
            self.parser = httptools.HttpResponseParser(self)
            self.chunks: list[bytes] = []
            self.waiter: asyncio.Future[None] | None = None
            self.done = False
            self.transport: asyncio.Transport | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport  # type: ignore[assignment]

        def data_received(self, data: bytes) -> None:
            self.parser.feed_data(data)
            waiter = self.waiter
            if waiter is not None and (self.chunks or self.done):
                self.waiter = None
                waiter.set_result(None)

        def on_body(self, body: bytes) -> None:
            self.chunks.append(body)

        def on_message_complete(self) -> None:
            self.done = True

        def connection_lost(self, exc: Exception | None) -> None:
            self.done = True
            if self.waiter is not None:
                self.waiter.set_result(None)

        async def chunk(self) -> bytes:
            if not self.chunks and not self.done:
                self.waiter = loop.create_future()
                await self.waiter
            if self.chunks:
                data = b"".join(self.chunks)
                self.chunks.clear()
                return data
            return b""

    async def call(body: bytes, streamed: bool) -> int:
        while idle and idle[-1].transport.is_closing():  # closed by the mock while idle
            idle.pop()
        if idle:
            conn = idle.pop()
        else:
            _, conn = await loop.create_connection(Conn, target.host, target.port)
        conn.done = False
        conn.transport.write(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        size = 0
        while chunk := await conn.chunk():
            size += len(chunk)
        idle.append(conn)
        return size

    async def close() -> None:
        for conn in idle:
            conn.transport.close()

    return call, close


async def _http1(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    """`providers.http1.Client` alone, as the other clients are called."""
    from yarl import URL

    from providers.http1 import Client, Timeouts

    client = Client(HEADERS, max_connections=100, connect_timeout=10.0)
    target = URL(url)
    timeouts = Timeouts(total=60.0)

    async def call(body: bytes, streamed: bool) -> int:
        response = await client.request("POST", target, body, timeouts)
        size = 0
        while chunk := await response.read_chunk():
            size += len(chunk)
        response.release()
        return size

    return call, client.close


async def _project(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from yarl import URL

    from providers.options import HttpOptions
    from providers.upstream import Upstream

    upstream = Upstream(HttpOptions(base_url=url, max_connections=100), HEADERS)
    target = URL(url)

    async def call(body: bytes, streamed: bool) -> int:
        if not streamed:
            return len(await upstream.request("POST", target, body))
        return await _drain(await upstream.stream(target, body))

    return call, upstream.close


async def _drain(response: object) -> int:
    """Reads a stream returned by `Upstream.stream` to its end, whatever its type."""
    size = 0
    read = getattr(response, "read_chunk", None)
    if read is not None:  # the project's own stream
        while chunk := await read():
            size += len(chunk)
        response.release()  # type: ignore[attr-defined]
        return size
    async for chunk in response.content.iter_any():  # type: ignore[attr-defined]
        size += len(chunk)
    response.release()  # type: ignore[attr-defined]
    return size


CANDIDATES = {
    "aiohttp": _aiohttp,
    "pyreqwest": _pyreqwest,
    "aiosonic": _aiosonic,
    "lean": _lean,
    "http1": _http1,
    "project": _project,
}


async def _load(call: Call, body: bytes, streamed: bool, requests: int, concurrency: int) -> float:
    """CPU seconds of this process for `requests` calls at `concurrency`."""
    left = requests

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            if await call(body, streamed) <= 0:
                raise RuntimeError("empty answer")

    start = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.process_time() - start


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _run(args: argparse.Namespace, url: str, mock_pid: int) -> None:
    clients: dict[str, Call] = {}
    closers = []
    for name in args.candidates:
        try:
            call, close = await CANDIDATES[name](url)
        except ImportError as exc:
            print(f"skipped {name}: {exc}")
            continue
        clients[name] = call
        closers.append(close)
    results: dict[tuple[str, str], list[float]] = {}
    mock: dict[str, list[float]] = {"json": [], "sse": []}
    names = list(clients)
    for round_ in range(args.rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for mode, body, streamed in (("json", JSON_BODY, False), ("sse", SSE_BODY, True)):
            for name in order:
                await _load(clients[name], body, streamed, args.warmup, args.concurrency)
                before = _proc_cpu(mock_pid)
                cpu = await _load(clients[name], body, streamed, args.requests, args.concurrency)
                mock[mode].append((_proc_cpu(mock_pid) - before) / args.requests)
                results.setdefault((name, mode), []).append(cpu / args.requests)
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    print(
        f"\nclient CPU per request, µs (median of {args.rounds} rounds, "
        f"{args.requests} requests, c={args.concurrency}; range in brackets)"
    )
    print(f"| client | JSON | SSE ({args.stream_chunks} chunks) |")
    print("|---|---:|---:|")
    for name in names:
        cells = []
        for mode in ("json", "sse"):
            values = [v * 1e6 for v in results[(name, mode)]]
            cells.append(f"{statistics.median(values):.0f} [{min(values):.0f}-{max(values):.0f}]")
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    print(
        f"| (mock upstream itself) | {statistics.median(mock['json']) * 1e6:.0f} "
        f"| {statistics.median(mock['sse']) * 1e6:.0f} |"
    )
    for note, count in NOTES.items():
        print(f"{note}: {count} (each sent again once)")
    for close in closers:
        await close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--stream-chunks", type=int, default=20)
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=CANDIDATES)
    args = parser.parse_args()
    port = _free_port()
    mock = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "mock_upstream.py"),
            "--port",
            str(port),
            "--stream-chunks",
            str(args.stream_chunks),
        ],
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        import uvloop

        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        uvloop.run(_run(args, url, mock.pid))
    finally:
        mock.terminate()
        mock.wait(timeout=10)


if __name__ == "__main__":
    main()
