"""One keep-alive HTTP/1.1 connection: writes a request, parses the answer with httptools as its
bytes arrive, and hands the body out chunk by chunk (content-length, chunked, or up to the
close).

One exchange at a time. The connection times itself: `watch(deadline, read_timeout)` arms one
timer that fails the exchange at `deadline` (loop time) or once no byte came for `read_timeout`
seconds; a read only notes the time, so a stream of many small reads costs no timer each.
Past `HIGH_WATER` unread bytes it stops reading from the socket (and the read timeout with it)
until the reader catches up.
"""

from __future__ import annotations

import asyncio

import httptools

from providers.http1.errors import BadAnswer, BrokenBody, Disconnected

__all__ = ["HIGH_WATER", "Connection"]

HIGH_WATER = 256 * 1024


class Connection(asyncio.Protocol):
    """The protocol of one socket; `Client` writes with `send` and reads with `head`/`chunk`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._error: BaseException | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._deadline: float | None = None
        self._read_timeout: float | None = None
        self._last_read = 0.0
        self._busy = False
        self._received = False
        self._delimited = False
        self._keep_alive = False
        self._interim = False
        self.idle_since = 0.0
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.content_type = b""
        self.head_done = False
        self.body_done = False
        self.closed = False

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self._busy:  # bytes nobody asked for: the connection is not fit to reuse
            self.close()
            return
        self._received = True
        if self._read_timeout is not None:
            self._last_read = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(BadAnswer(f"the upstream's answer is not valid HTTP: {exc}"))
            return
        self._wake()

    def eof_received(self) -> bool:
        return False  # a half-closed connection is closed: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_timer()
        if self._busy and not self.body_done and self._error is None:
            if self.head_done and not self._delimited:
                self.body_done = True  # the body was "until the connection closes"
                self._keep_alive = False
            elif not self._received:
                self._error = Disconnected("the upstream closed the connection before answering")
            else:
                reason = f": {exc}" if exc is not None else ""
                self._error = BrokenBody(f"the upstream broke off its answer{reason}")
        self._wake()

    # -- httptools callbacks ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.body_done:  # a second answer to one request: the connection is out of step
            raise BadAnswer("the upstream sent more than one answer")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name, value))
        size = len(name)
        if size == 12:
            if name.lower() == b"content-type":
                self.content_type = value
        elif size in (14, 17) and name.lower() in (b"content-length", b"transfer-encoding"):
            self._delimited = True

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:  # an interim answer (103 Early Hints): the real one follows
            self.raw_headers = []
            self.content_type = b""
            self._delimited = False
            self._interim = True
            return
        self.status = status
        self._keep_alive = self._parser.should_keep_alive()
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
            self._cancel_timer()
            self._arm()  # the total deadline still holds

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self.body_done = True
        self._cancel_timer()

    # -- the client's side ------------------------------------------------------------------

    def loop_time(self) -> float:
        return self._loop.time()

    def usable(self) -> bool:
        """Open, idle and not half-closed: fit to carry the next request."""
        transport = self._transport
        return not self.closed and transport is not None and not transport.is_closing()

    def send(self, data: bytes, body: bytes) -> None:
        """Start an exchange: write the request head `data` and its `body`."""
        self._busy = True
        self._received = self._delimited = self._keep_alive = self._interim = False
        self.head_done = self.body_done = False
        self.status = 0
        self.raw_headers = []
        self.content_type = b""
        self._error = None
        transport = self._transport
        assert transport is not None
        if len(body) < 65536:
            transport.write(data + body)
        else:  # a large body is not copied once more
            transport.writelines((data, body))

    def watch(self, deadline: float | None, read_timeout: float | None) -> None:
        """Fail the exchange (once sent) at `deadline` (loop time) or after `read_timeout` s
        without a byte."""
        self._cancel_timer()
        self._deadline = deadline
        self._read_timeout = read_timeout
        if read_timeout is not None:
            self._last_read = self._loop.time()
        self._arm()

    async def head(self) -> None:
        """Wait for the status line and the headers."""
        while not self.head_done:
            if self._error is not None:
                raise self._error
            self._waiter = waiter = self._loop.create_future()
            await waiter

    async def chunk(self) -> bytes:
        """The body's bytes received so far (at least one), or b"" at its end."""
        while True:
            chunks = self._chunks
            if chunks:
                data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                chunks.clear()
                self._buffered = 0
                if self._paused:
                    self._resume()
                return data
            if self.body_done:
                return b""
            if self._error is not None:
                raise self._error
            self._waiter = waiter = self._loop.create_future()
            await waiter  # woken by the next bytes, the end, or a failure

    def has_chunks(self) -> bool:
        return bool(self._chunks)

    def reusable(self) -> bool:
        """The answer was read to its end and both sides keep the connection open."""
        return self.body_done and self._keep_alive and not self._chunks and self.usable()

    def finish(self) -> None:
        """End the exchange (the connection goes back to the pool or is closed)."""
        self._busy = False
        self._cancel_timer()

    def close(self) -> None:
        self.closed = True
        self._cancel_timer()
        if self._transport is not None:
            self._transport.close()

    # -- inside -----------------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self.closed = True
        self._cancel_timer()
        if self._transport is not None:
            self._transport.abort()
        self._wake()

    def _resume(self) -> None:
        self._paused = False
        if self._transport is not None and not self.closed:
            self._transport.resume_reading()
            if self._read_timeout is not None:
                self._last_read = self._loop.time()
            self._cancel_timer()
            if not self.body_done:
                self._arm()

    def _arm(self) -> None:
        at = self._deadline
        if self._read_timeout is not None and not self._paused:
            quiet_until = self._last_read + self._read_timeout
            if at is None or quiet_until < at:
                at = quiet_until
        if at is not None:
            self._timer = self._loop.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = self._loop.time()
        deadline = self._deadline
        read_timeout = self._read_timeout
        if deadline is not None and now >= deadline:
            self._fail(TimeoutError("the upstream did not answer within the total timeout"))
        elif (
            read_timeout is not None and not self._paused and now >= self._last_read + read_timeout
        ):
            self._fail(TimeoutError(f"no byte from the upstream for {read_timeout} s"))
        else:
            self._arm()

    def _cancel_timer(self) -> None:
        timer = self._timer
        if timer is not None:
            self._timer = None
            timer.cancel()
