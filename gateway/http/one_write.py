"""An answer's head (status line and headers) and its body's first bytes in one write.

uvicorn writes an answer's head when the app starts it and its body when the app sends it: two
`send()`s, and two wake-ups of the client, for every answer. `OneWriteTransport` is what a
request's cycle writes through: it holds the head until the body's first bytes and writes both
together, always before the answer is complete. A head waits no longer than the turn of the
event loop it was made in (a stream's client sees its status as soon as before), and a head
still held when the cycle closes the connection is written first, as uvicorn would have. A
`100 Continue` and the head of an answer to `HEAD` (no body follows) are written at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

__all__ = ["OneWriteTransport"]


class OneWriteTransport:
    """`transport` as `cycle` writes through it, with the answer's head held for its body."""

    __slots__ = ("_cycle", "_head", "_loop", "_started", "_transport")

    def __init__(
        self,
        transport: asyncio.Transport,
        cycle: RequestResponseCycle,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._transport = transport
        self._cycle = cycle
        self._loop = loop
        self._head: bytes | None = None
        self._started = False
        """The head was written or is held: every later write is body."""

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head + data)
        elif not self._started and self._cycle.response_started:
            self._started = True
            if self._cycle.scope["method"] == "HEAD":  # no body follows
                self._transport.write(data)
            else:
                self._head = data
                self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        head, self._head = self._head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
