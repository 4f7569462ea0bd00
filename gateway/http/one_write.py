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

__all__ = ["OneWriteTransport"]

_INTERIM = b"HTTP/1.1 1"
"""A `100 Continue`: written at once, the answer's head comes later."""


class OneWriteTransport:
    """`transport` as a request's cycle writes through it, with the answer's head held for its
    body. It keeps no reference to the cycle (that would make every request a reference cycle
    for the garbage collector): the head is the first write that is not a `1xx`."""

    __slots__ = ("_head", "_loop", "_passing", "_transport")

    def __init__(
        self, transport: asyncio.Transport, method: str, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None
        self._passing = method == "HEAD"  # no body follows its head
        """Every write goes straight through: the head was written, or is not held."""

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head + data)
        elif self._passing or data.startswith(_INTERIM):
            self._transport.write(data)
        else:
            self._passing, self._head = True, data
            self._loop.call_soon(self._flush)

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
