"""The HTTP/1.1 server protocol: uvicorn's httptools protocol with bounded request heads and
read timeouts, so hostile or slow clients cost milliseconds, not seconds.

uvicorn bounds neither the request head nor the time a client may take to send it: a 64 MB
header line was parsed (quadratically) for seconds while every other request waited. Here:

- The request line and headers together may take `max_head_bytes`, and there may be at most
  `max_headers` header lines. Bytes are counted before the parser sees them, so an oversized
  head costs at most `max_head_bytes` of parsing: the client gets 431 in the error envelope, the
  connection is closed, and what it still sends is discarded for a moment (so it can read the
  answer instead of a reset).
- A request head must arrive completely within `head_timeout` seconds of its first byte (or of
  the connection's opening), and a body may pause at most `body_idle_timeout` seconds between
  two reads; otherwise 408 in the envelope and the connection is closed. One timer per
  connection checks both, so the cost per request is two clock reads.
- A request the parser rejects gets 400 in the envelope (uvicorn answers in plain text).

Idle keep-alive connections are closed by uvicorn after `timeout_keep_alive` (5 s).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from gateway.envelope import envelope_bytes
from gateway.errors import GatewayError, InvalidRequest, RequestHeadTooLarge, RequestTimedOut
from gateway.ids import new_request_id
from gateway.logging import get_logger

__all__ = ["HttpLimits", "bounded_protocol"]

_log = get_logger("gateway.http")

_LINGER_SECONDS = 0.5
"""How long a connection answered with an error still swallows what its client sends."""

_HEAD, _BODY, _RESPONDING = 0, 1, 2


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_head_bytes: int = 32 * 1024
    max_headers: int = 100
    head_timeout: float = 10.0
    body_idle_timeout: float = 30.0


def bounded_protocol(limits: HttpLimits) -> type[HttpToolsProtocol]:
    """The protocol class for uvicorn's `http=` setting, with `limits`."""
    return type("BoundedHttpToolsProtocol", (_BoundedProtocol,), {"limits": limits})


class _BoundedProtocol(HttpToolsProtocol):
    limits: HttpLimits = HttpLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_left: int | None = self.limits.max_head_bytes
        """Bytes the current request head may still take; None once the head is complete."""
        self._header_count = 0
        self._too_many_headers = False
        self._phase = _HEAD
        self._phase_started = self.loop.time()
        self._last_read = self._phase_started
        self._watchdog: asyncio.TimerHandle | None = None
        self._discarding = False

    # Connection ----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._phase_started = self._last_read = self.loop.time()
        self._watchdog = self.loop.call_later(self._tick_seconds(), self._tick)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            return
        self._last_read = self.loop.time()
        left = self._head_left
        if left is None or len(data) <= left:
            if left is not None:
                self._head_left = left - len(data)
            self._feed(data)
            return
        # More than the head may still take: parse up to the limit, and see whether it ended.
        self._head_left = 0
        self._feed(data[:left])
        if self._head_left is not None:
            if not self._discarding:
                self._refuse(RequestHeadTooLarge(self._head_message()))
        elif not self._discarding and self.parser is not None:
            self._feed(data[left:])

    def _feed(self, data: bytes) -> None:
        if self.parser is not None:  # None: the connection is gone
            super().data_received(data)

    def _head_message(self) -> str:
        limits = self.limits
        return (
            f"The request line and headers must fit in {limits.max_head_bytes} bytes, "
            f"in at most {limits.max_headers} header lines."
        )

    # Parser callbacks ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._phase != _HEAD:
            self._phase, self._phase_started = _HEAD, self.loop.time()
        self._header_count = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._too_many_headers = True
            raise _HeadRefused()
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head_left = None
        self._phase = _BODY
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_left = self.limits.max_head_bytes
        self._phase = _RESPONDING

    def send_400_response(self, msg: str) -> None:
        if self._too_many_headers:
            self._refuse(RequestHeadTooLarge(self._head_message()))
        else:
            self._refuse(InvalidRequest("The HTTP request is malformed."))

    # Timeouts ------------------------------------------------------------------------------

    def _tick_seconds(self) -> float:
        return min(self.limits.head_timeout, self.limits.body_idle_timeout, 1.0)

    def _tick(self) -> None:
        self._watchdog = None
        if self.transport is None or self.transport.is_closing():
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

    # Refusing ------------------------------------------------------------------------------

    def _refuse(self, error: GatewayError) -> None:
        """Answer `error` in the envelope, then close; only close when the request it is about
        was answered already, or an earlier response is still going out."""
        self._discarding = True
        cycle = self.cycle  # in the head phase: the previous request's, if any
        if self._phase == _HEAD:
            answer = cycle is None or cycle.response_complete
        else:
            answer = cycle is not None and not cycle.response_started
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's own reads end, its writes are dropped
            cycle.message_event.set()
        transport = self.transport
        if answer:
            request_id = new_request_id()
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


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a head that broke a limit; httptools
    reports it as a parser error, which uvicorn answers through `send_400_response`."""
