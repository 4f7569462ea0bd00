"""A streamed chat answer as an ASGI response: Server-Sent Events, and the client going away.

The events come from the chat service (`gateway.chat.outcomes.ChatEvents`); this sends them as
they come, the last one ending the body in the same write, and watches `receive` for the
client leaving, which stops the stream (the upstream request is closed and what was produced
is settled). A send that fails means the same. A client
that stops reading is given up by the HTTP protocol after `write_timeout_seconds` (a send waits
at most that long for room, `gateway.http.flow`), and this sees it as a client that left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from gateway.chat.outcomes import ChatEvents
from gateway.http.openai_sse import SSE_CONTENT_TYPE

__all__ = ["send_event_stream"]

_HEADERS = [
    (b"content-type", SSE_CONTENT_TYPE.encode()),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


async def send_event_stream(
    events: ChatEvents, receive: Any, send: Any, extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """Send the events as they come (`extra`: more response headers)."""
    watcher = asyncio.create_task(_watch(events, receive))
    try:
        headers = [*_HEADERS, *extra]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        finished = False
        async for frame in events.events():
            if events.gone:
                continue
            finished = events.ended  # the last frame ends the body in the same write
            try:
                await send({"type": "http.response.body", "body": frame, "more_body": not finished})
            except OSError:
                await events.client_left()
        if not events.gone and not finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        watcher.cancel()
        await events.close()


async def _watch(events: ChatEvents, receive: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            await events.client_left()
            return
