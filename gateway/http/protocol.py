"""The HTTP/1.1 server protocol: uvicorn's httptools protocol with bounded request heads, read
and write timeouts, so hostile or slow clients cost milliseconds, not seconds.

uvicorn bounds neither the request head nor the time a client may take to send it or to take
an answer (a 64 MB header line was parsed quadratically for seconds; a client that stopped
reading held its stream, upstream call and credit hold forever). Here:

- Each request head (request line and headers) may take `max_head_bytes` in at most
  `max_headers` lines. Bytes are counted before the parser sees them while a head is read, so
  an oversized head costs at most `max_head_bytes` of parsing: 431 in the envelope, the
  connection closed, what the client still sends discarded for a moment (so it reads the
  answer, not a reset). Pipelined requests each have their own budget: a read holding many is
  fed in turns (the parser's callbacks and the heads' blank lines tell where each head lies
  in it), and a refused head is answered after the requests before it.
- A head must arrive within `head_timeout` seconds of its first byte (or of the connection's
  opening), and a body may pause at most `body_idle_timeout` seconds between two reads; else
  408 and the connection is closed. One timer per connection checks both.
- A client that takes no response bytes for `write_timeout` seconds is given up
  (`gateway.http.flow`): the request sees a disconnect (a stream stops, its upstream call is
  closed, what was produced is settled) and the connection is reset.
- A request the parser rejects gets 400 in the envelope (uvicorn answers in plain text).
- No connection is upgraded: a WebSocket handshake reaches the app as a plain request marked
  `WEBSOCKET_HANDSHAKE`, which the middleware answers in the envelope.
- A request whose connection ends before its answer began is marked `CONNECTION_ENDED` with
  the status it is counted under: 499 when the client closed it, or the protocol's refusal.
- An answer's head goes out with its body's first bytes, in one write (`one_write.py`).

Idle keep-alive connections are closed by uvicorn after `timeout_keep_alive` (5 s).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from gateway.errors import GatewayError, InvalidRequest, RequestHeadTooLarge, RequestTimedOut
from gateway.http.context import SCOPE_KEY, RequestContext
from gateway.http.envelope import envelope_bytes
from gateway.http.flow import BoundedFlowControl, reset
from gateway.http.one_write import OneWriteTransport
from gateway.ids import new_request_id
from gateway.logging import get_logger

__all__ = [
    "CLIENT_CLOSED",
    "CLIENT_CLOSED_CODE",
    "CLIENT_GONE",
    "CONNECTION_ENDED",
    "WEBSOCKET_HANDSHAKE",
    "HttpLimits",
    "bounded_protocol",
]

CONNECTION_ENDED = "gateway.connection_ended"
"""Scope key: `(status, code)` a request is counted under because its connection ended before
its answer began; nothing the app sends then reaches anyone."""
CLIENT_CLOSED = 499
"""The conventional status of a request whose client closed the connection ("client closed
request"); it is never sent, only logged and counted."""
CLIENT_CLOSED_CODE = "client_closed_request"
WEBSOCKET_HANDSHAKE = "gateway.websocket_handshake"
"""Scope key, present on a request asking to upgrade to a WebSocket."""
CLIENT_GONE = "gateway.client_gone"
"""Scope key on every request this protocol runs: None until the app puts a callable there,
which is called once, with no arguments, when the request's client is gone (its connection
lost, a write stalled past `write_timeout`, the request refused mid-body); True once it is
gone. An event stream learns of its client leaving this way, with no task waiting on
`receive` (`gateway.http.event_stream`)."""

_log = get_logger("gateway.http")

_LINGER_SECONDS = 0.5
"""How long a connection answered with an error still swallows what its client sends."""

_HEAD, _BODY, _RESPONDING = 0, 1, 2
_BLANK_LINE = b"\r\n\r\n"


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_head_bytes: int = 32 * 1024
    max_headers: int = 100
    head_timeout: float = 10.0
    body_idle_timeout: float = 30.0
    write_timeout: float = 30.0


def bounded_protocol(limits: HttpLimits) -> type[HttpToolsProtocol]:
    """The protocol class for uvicorn's `http=` setting, with `limits`."""
    return type("BoundedHttpToolsProtocol", (_BoundedProtocol,), {"limits": limits})


_Base = HttpToolsProtocol
"""Called directly, not through `super()`, in the per-request and per-header callbacks."""


class _BoundedProtocol(HttpToolsProtocol):
    limits: HttpLimits = HttpLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_left: int | None = self.limits.max_head_bytes
        """Bytes the current (or next) request head may still take; None while a body is read."""
        self._header_count = 0
        self._phase = _HEAD
        self._phase_started = self.loop.time()
        self._last_read = self._phase_started
        self._watchdog: asyncio.TimerHandle | None = None
        self._discarding = False
        self._running: RequestResponseCycle | None = None
        """The request whose app runs (the earliest unanswered); `cycle` is the last parsed."""
        self._head_over = False
        # Where heads lie in the read being parsed (`_piece`), kept by the parser's callbacks:
        # offsets into it, None where a chunked body hid them.
        self._piece = b""
        self._mark: int | None = 0
        """Just past what the current message has taken of `_piece` so far."""
        self._head_start: int | None = 0
        """Where the current head began in `_piece` (0 when in an earlier read)."""
        self._head_before = 0
        """Bytes the current head took in earlier reads; `_carry` is the last 3 of them."""
        self._carry = b""
        self._began = False
        self._chunked = False

    # Connection ----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = BoundedFlowControl(transport, self.limits.write_timeout, self._write_stalled)
        self._phase_started = self._last_read = self.loop.time()
        self._watchdog = self.loop.call_later(self._tick_seconds(), self._tick)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        running = self._running
        if running is not None and not running.response_complete:
            if not running.response_started:
                _scope(running).setdefault(CONNECTION_ENDED, (CLIENT_CLOSED, CLIENT_CLOSED_CODE))
            _client_gone(running)  # uvicorn tells only the last parsed request
        super().connection_lost(exc)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        self._running = cycle
        _scope(cycle)[CLIENT_GONE] = None
        cycle.transport = OneWriteTransport(  # type: ignore[assignment]
            cycle.transport, cycle.scope["method"], self.loop
        )
        _Base._start_asgi_task(self, cycle, app)

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            return
        self._last_read = self.loop.time()
        while True:
            # A head being read gets no more than its budget, so no head costs more parsing
            # than that; a read that holds more (pipelined requests) is fed in turns.
            left = self._head_left
            if left is not None and len(data) > left:
                piece, data = data[:left], data[left:]
            else:
                piece, data = data, b""
            self._piece, self._began = piece, False
            self._mark = None if self._phase == _BODY and self._chunked else 0
            self._head_start = 0
            if self.parser is not None:  # None: the connection is gone
                _Base.data_received(self, piece)
            if self._discarding or self.parser is None:
                return
            if self._phase == _HEAD:
                used = self._head_used(piece)
                self._head_before, self._carry = used, piece[len(piece) - min(used, 3) :]
                self._head_left = self.limits.max_head_bytes - used
                if self._head_left < 0 or (data and not self._head_left):
                    self._refuse(RequestHeadTooLarge(self._head_message()))
                    return
            if not data:
                return

    def _head_used(self, piece: bytes) -> int:
        """Bytes the unfinished head has taken, this read's included."""
        if not self._began:
            return self._head_before + len(piece)
        start = self._head_start
        if start is None:  # after a chunked body, which ends at a blank line, as a head does
            end = piece.rfind(_BLANK_LINE)
            start = end + len(_BLANK_LINE) if end >= 0 else 0
        return len(piece) - start

    def _head_size(self) -> int | None:
        """The size of the head just parsed, its blank line included (None: not known, after
        a chunked body in the same read); notes where its body begins."""
        start, piece = self._head_start, self._piece
        if start is None:
            return None
        if self._head_before:  # it began in an earlier read: its blank line may straddle
            carry = self._carry
            at = (carry + piece[:3]).find(_BLANK_LINE)
            if at >= 0:
                end = at - len(carry)
            else:
                end = piece.find(_BLANK_LINE)
                if end < 0:
                    return None
        else:
            skip = start
            end = piece.find(_BLANK_LINE, skip)
            while end == skip:  # blank lines before a request line, which the parser skips
                skip += 2
                end = piece.find(_BLANK_LINE, skip)
            if end < 0:
                return None
        self._mark = end + len(_BLANK_LINE)
        return self._head_before + self._mark - start

    def _head_message(self) -> str:
        limits = self.limits
        return (
            f"The request line and headers must fit in {limits.max_head_bytes} bytes, "
            f"in at most {limits.max_headers} header lines."
        )

    # Parser callbacks ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        _Base.on_message_begin(self)
        if self._phase != _HEAD:
            self._phase, self._phase_started = _HEAD, self.loop.time()
        self._header_count = 0
        self._began, self._head_start, self._head_before = True, self._mark, 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._head_over = True
            raise _HeadRefused()
        _Base.on_header(self, name, value)

    def on_headers_complete(self) -> None:
        # A head the read held whole (after a body, which is fed unbounded) is measured here.
        size = self._head_size()
        if size is not None and size > self.limits.max_head_bytes:
            self._head_over = True
            raise _HeadRefused()
        self._head_left = None
        self._phase = _BODY
        self._chunked = False
        _Base.on_headers_complete(self)

    def on_body(self, body: bytes) -> None:
        if self._mark is not None:
            self._mark += len(body)
        _Base.on_body(self, body)

    def on_chunk_header(self) -> None:
        self._chunked, self._mark = True, None  # its framing is not seen: offsets are lost

    def on_message_complete(self) -> None:
        _Base.on_message_complete(self)
        self._head_left = self.limits.max_head_bytes
        self._phase = _RESPONDING

    def send_400_response(self, msg: str) -> None:
        if self._head_over:
            self._refuse(RequestHeadTooLarge(self._head_message()))
        else:
            self._refuse(InvalidRequest("The HTTP request is malformed."))

    # Upgrades ------------------------------------------------------------------------------

    def _should_upgrade(self) -> bool:
        """Never: a WebSocket handshake is marked and answered by the app as a refusal."""
        if self._get_upgrade() == b"websocket":
            scope: dict[str, Any] = self.scope  # type: ignore[assignment]
            scope[WEBSOCKET_HANDSHAKE] = True
        return False

    def _unsupported_upgrade_warning(self) -> None:
        """Silent: the upgrade is answered in the envelope and logged as a request."""

    # Timeouts ------------------------------------------------------------------------------

    def _tick_seconds(self) -> float:
        return min(self.limits.head_timeout, self.limits.body_idle_timeout, 1.0)

    def _tick(self) -> None:
        self._watchdog = None
        if self._discarding or self.transport is None or self.transport.is_closing():
            return
        now = self.loop.time()
        if self._phase == _HEAD and now - self._phase_started > self.limits.head_timeout:
            self._refuse(
                RequestTimedOut(
                    f"The request head did not arrive within {self.limits.head_timeout:g} s."
                )
            )
            return
        if self._phase == _BODY and now - self._last_read > self.limits.body_idle_timeout:
            self._refuse(
                RequestTimedOut(
                    f"The request body stalled for more than {self.limits.body_idle_timeout:g} s."
                )
            )
            return
        self._watchdog = self.loop.call_later(self._tick_seconds(), self._tick)

    def _write_stalled(self) -> None:
        """The client took no bytes for `write_timeout`: its request sees a disconnect, and
        the connection is reset (a close would wait for the full buffers to drain)."""
        running = self._running
        if running is not None and not running.response_complete:
            _client_gone(running)
        _log.info(
            "response_write_timeout",
            seconds=self.limits.write_timeout,
            route=running.scope.get("path") if running is not None else None,
            client=self.client[0] if self.client else None,
        )
        reset(self.transport)

    # Refusing ------------------------------------------------------------------------------

    def _refuse(self, error: GatewayError) -> None:
        """Answer `error` in the envelope, then close. The request it is about is answered in
        its turn: after the requests pipelined before it, never in the middle of theirs."""
        self._discarding = True
        # The request being read; in the head phase, the one before it.
        cycle: RequestResponseCycle | None = self.cycle
        if self._phase == _BODY and cycle is not None:
            if self.pipeline and self.pipeline[0][0] is cycle:
                self.pipeline.popleft()  # queued behind another: it never runs
                cycle = self.pipeline[0][0] if self.pipeline else self._running
            elif cycle.response_started:  # it answered already: that answer stands, cut
                if not cycle.response_complete:
                    _client_gone(cycle)
                self._close(None)
                return
            else:  # it runs: it ends now, counted as refused, under the id its log line has
                scope = _scope(cycle)
                ctx: RequestContext | None = scope.get(SCOPE_KEY)
                if not cycle.response_complete:
                    scope[CONNECTION_ENDED] = (error.status_code, error.code)
                    _client_gone(cycle)  # the app's own reads end, its writes are dropped
                self._close(error, ctx.request_id if ctx is not None else None)
                return
        if cycle is None or cycle.response_complete:
            self._close(error)
        else:
            cycle.on_response = self._after_response(error)

    def _after_response(self, error: GatewayError) -> Callable[[], None]:
        def refuse_in_turn() -> None:
            self.on_response_complete()
            if not self.transport.is_closing():
                self._close(error)

        return refuse_in_turn

    def _close(self, error: GatewayError | None, request_id: str | None = None) -> None:
        transport = self.transport
        self._unset_keepalive_if_required()
        if error is not None:
            request_id = request_id or new_request_id()
            body = envelope_bytes(error, request_id)
            transport.write(
                b"".join(
                    [
                        STATUS_LINE[error.status_code],
                        b"content-type: application/json\r\n",
                        b"content-length: %d\r\n" % len(body),
                        b"x-request-id: %s\r\n" % request_id.encode(),
                        b"connection: close\r\n\r\n",
                        body,
                    ]
                )
            )
            _log.info(
                "request_refused",
                request_id=request_id,
                status=error.status_code,
                error=error.code,
                client=self.client[0] if self.client else None,
            )
        if transport.can_write_eof():
            transport.write_eof()
            self.loop.call_later(_LINGER_SECONDS, transport.close)
        else:
            transport.close()


def _client_gone(cycle: RequestResponseCycle) -> None:
    """The request's client is gone: its reads end, and the app's `CLIENT_GONE` is called."""
    cycle.disconnected = True
    cycle.message_event.set()
    scope = _scope(cycle)
    told = scope.get(CLIENT_GONE)
    scope[CLIENT_GONE] = True
    if callable(told):
        told()


def _scope(cycle: RequestResponseCycle) -> dict[str, Any]:
    """A request's scope, to mark with the gateway's own keys."""
    scope: dict[str, Any] = cycle.scope  # type: ignore[assignment]
    return scope


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a head that broke a limit; httptools
    reports it as a parser error, which uvicorn answers through `send_400_response`."""
