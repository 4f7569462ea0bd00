"""Writing to a client that does not read: uvicorn's flow control with a bounded wait, and the
reset that gives such a client up.

uvicorn's `FlowControl.drain` waits, without end, for a full send buffer to drain before a
response sends more; `BoundedFlowControl` waits `timeout` seconds and then calls `on_timeout`
(the protocol marks the request disconnected and resets the connection). `reset` aborts a
transport with a zero linger: aborting drops what the transport buffered, the linger what the
kernel did (megabytes on a fast link), which a close would wait to send forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable

from uvicorn.protocols.http.flow_control import FlowControl

__all__ = ["BoundedFlowControl", "reset"]

_RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on, 0 seconds: closing resets the connection, dropping unsent bytes."""


class BoundedFlowControl(FlowControl):
    """uvicorn's flow control, whose wait for a full send buffer to drain is bounded."""

    def __init__(
        self, transport: asyncio.Transport, timeout: float, on_timeout: Callable[[], None]
    ) -> None:
        super().__init__(transport)
        self._timeout = timeout
        self._on_timeout = on_timeout

    async def drain(self) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                await self._is_writable_event.wait()
        except TimeoutError:
            self._on_timeout()
            await asyncio.sleep(0)  # the request's disconnect watchers run before it sends on


def reset(transport: asyncio.Transport) -> None:
    """Close `transport` at once with a reset, dropping every byte not yet sent."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    transport.abort()
