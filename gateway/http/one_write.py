"""An answer of known length in one write: its head (status line and headers) held until its
body's first bytes.

uvicorn writes an answer's head when the app starts it and its body when the app sends it: two
`send()`s, and two wake-ups of the client, for every JSON answer. `OneWriteTransport` is what a
request's cycle writes through: the head of an answer with a `content-length` waits for the body
and both go out together. Everything else passes straight through: a chunked answer's head (a
stream's client sees its status before the first event), a `100 Continue`, the head of an
answer to `HEAD` (which has no body to wait for). A head still held when the cycle closes the
connection is written first, as uvicorn would have.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

__all__ = ["OneWriteTransport"]

_BEFORE_HEAD, _HOLDING, _PASSING = 0, 1, 2


class OneWriteTransport:
    """`transport` as `cycle` writes through it, with the head of a sized answer held."""

    __slots__ = ("_cycle", "_head", "_state", "_transport")

    def __init__(self, transport: asyncio.Transport, cycle: RequestResponseCycle) -> None:
        self._transport = transport
        self._cycle = cycle
        self._head = b""
        self._state = _BEFORE_HEAD

    def write(self, data: bytes) -> None:
        state = self._state
        if state == _HOLDING:
            self._state, head, self._head = _PASSING, self._head, b""
            self._transport.write(head + data)
            return
        if state == _BEFORE_HEAD and self._cycle.response_started:
            # The answer's head: uvicorn has just read its content-length or chosen chunked.
            self._state = _PASSING
            cycle = self._cycle
            if cycle.chunked_encoding is False and cycle.scope["method"] != "HEAD":
                self._state, self._head = _HOLDING, data
                return
        self._transport.write(data)

    def close(self) -> None:
        if self._state == _HOLDING:
            self._state, head, self._head = _PASSING, self._head, b""
            self._transport.write(head)
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
