"""A streamed chat answer as an ASGI response: Server-Sent Events, and the client going away.

The events come from the chat service (`gateway.chat.outcomes.ChatEvents`); this sends them as
they come (the head with the first, the last ending the body in the same write), and watches
`receive` for the client leaving, which stops the stream (the upstream request is closed and
what was produced is settled). A send that fails means the same. A client
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
    """Send the events as they come (`extra`: more response headers).

    The head goes out with the first frame: that frame arrived before the outcome did, so it
    is ready at once, unless the whole stream was, when the call settles first and the head,
    every frame and the end go out in one write."""
    watcher = asyncio.create_task(_watch(events, receive))
    try:
        head: dict[str, Any] | None = {
            "type": "http.response.start",
            "status": 200,
            "headers": [*_HEADERS, *extra],
        }
        finished = False
        async for frame in events.events():
            if events.gone:
                continue
            finished = events.ended  # the last frame ends the body in the same write
            try:
                if head is not None:
                    await send(head)
                    head = None
                await send({"type": "http.response.body", "body": frame, "more_body": not finished})
            except OSError:
                await events.client_left()
        if not events.gone and not finished:
            if head is not None:
                await send(head)
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
