"""A TCP proxy between a gateway and a fake upstream whose behaviour a test switches at run time.

It listens on 127.0.0.1 and a free port and forwards each accepted connection to `target`.
The routing file points the upstream's `base_url` at `proxy.url(path)`, and the test decides
what the wire does, from now on, for new connections and for those already open:

    proxy = FaultProxy(("127.0.0.1", fake_port)); proxy.start()      # its own thread and loop
    proxy.set(Fault.latency(0.5))        # every forwarded chunk waits 0.5 s
    proxy.set(Fault.reset())             # new connections are accepted, then reset (RST)
    proxy.set(Fault.stall())             # accepted, nothing forwarded either way, never closed
    proxy.set(Fault.stall(after=300))    # responses stop after 300 bytes; the socket stays open
    proxy.set(Fault.truncate(300))       # responses end (FIN) after 300 bytes
    proxy.set(Fault.malformed(b"..."))   # every new connection is answered with these bytes
    proxy.set(Fault.PASS)                # pass-through again
    proxy.connections                    # connections accepted so far
    proxy.kill_open()                    # reset every connection now open (mid-stream faults)
    proxy.stop()

A response's byte budget (`after`, `truncate`) counts per connection from the moment the fault
applies to it; with keep-alive, later responses on that connection share it. `reset` and
`malformed` reset the connections open when they are set and meet every new one; `latency`
and `stall` act on open connections too. A stall never lets go by itself: the gateway's own
timeouts must end the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["Fault", "FaultProxy"]

_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Fault:
    """What the proxy does; build one with the class methods (`Fault.PASS` passes through)."""

    kind: str = "pass"
    delay: float = 0.0
    after: int | None = None  # response bytes let through before a stall or an end
    body: bytes = b""

    PASS: ClassVar[Fault]

    @classmethod
    def latency(cls, seconds: float) -> Fault:
        return cls("latency", delay=seconds)

    @classmethod
    def reset(cls) -> Fault:
        return cls("reset")

    @classmethod
    def stall(cls, after: int = 0) -> Fault:
        return cls("stall", after=after)

    @classmethod
    def truncate(cls, after: int) -> Fault:
        return cls("truncate", after=after)

    @classmethod
    def malformed(cls, body: bytes) -> Fault:
        return cls("malformed", body=body)


Fault.PASS = Fault()


class _Link:
    """One accepted connection and its upstream side."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.sent = 0  # response bytes sent to the client under the current budget
        self.budget_of: Fault | None = None

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                _reset(writer)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST instead of a FIN (SO_LINGER 0)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.fault = Fault.PASS
        self.connections = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # Control, from the test's thread ------------------------------------------------------

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def set(self, fault: Fault) -> None:
        """From now on; `reset` and `malformed` also reset the connections open now, so the
        client's next request (even on a pooled keep-alive connection) meets the fault."""
        self.fault = fault  # one attribute write: the proxy's loop reads it per chunk
        if fault.kind in ("reset", "malformed"):
            self.kill_open()

    def kill_open(self) -> None:
        """Reset every connection open now."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._abort_all)

    def _abort_all(self) -> None:
        for link in list(self._links):
            link.abort()

    def start(self) -> FaultProxy:
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._accept, "127.0.0.1", 0)
                )
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        started.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for link in list(self._links):
                link.abort()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # The proxy, on its own loop ------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        fault = self.fault
        link = _Link(writer)
        self._links.add(link)
        try:
            if fault.kind == "reset":
                _reset(writer)
                return
            if fault.kind == "malformed":
                with contextlib.suppress(ConnectionError):
                    await reader.read(_CHUNK)  # the request's first bytes, then the answer
                    writer.write(fault.body)
                    await writer.drain()
                writer.close()
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                _reset(writer)
                return
            link.upstream = up_writer
            upward = asyncio.ensure_future(self._pump(reader, up_writer, link, response=False))
            downward = asyncio.ensure_future(self._pump(up_reader, writer, link, response=True))
            self._tasks.update((upward, downward))
            try:
                await asyncio.wait({upward, downward}, return_when=asyncio.FIRST_COMPLETED)
                # One side ended: let the other finish flushing what it has, briefly.
                await asyncio.wait({upward, downward}, timeout=0.5)
            finally:
                for task in (upward, downward):
                    task.cancel()
                    self._tasks.discard(task)
                for side in (writer, up_writer):
                    with contextlib.suppress(Exception):
                        side.close()
        finally:
            self._links.discard(link)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: _Link,
        *,
        response: bool,
    ) -> None:
        try:
            while True:
                data = await reader.read(_CHUNK)
                if not data:
                    with contextlib.suppress(OSError, RuntimeError):
                        writer.write_eof()
                    return
                fault = self.fault
                if fault.kind == "latency":
                    await asyncio.sleep(fault.delay)  # the injected latency
                elif fault.kind == "stall" and not fault.after:
                    if not response:
                        continue  # swallowed: read on only to notice the client leave
                    await _forever()
                if response and fault.kind in ("stall", "truncate"):
                    if link.budget_of is not fault:
                        link.budget_of, link.sent = fault, 0
                    room = (fault.after or 0) - link.sent
                    if room < len(data):
                        if room > 0:
                            writer.write(data[:room])
                            link.sent += room
                            await writer.drain()
                        if fault.kind == "truncate":
                            writer.close()
                            return
                        await _forever()  # the client's side notices when it leaves
                    link.sent += len(data)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            return


async def _forever() -> None:
    await asyncio.Event().wait()
