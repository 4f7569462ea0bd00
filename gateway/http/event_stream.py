"""A streamed chat answer as an ASGI response: Server-Sent Events, and the client going away.

The events come from the chat service (`gateway.chat.outcomes.ChatEvents`); this sends them as
they come, the head with the first thing yielded (an empty frame says "the head, now", before
the stream waits on its upstream) and the last one ending the body in the same write. The
client leaving stops the stream (the upstream request is closed and what was produced is
settled): the gateway's HTTP protocol says so through `CLIENT_GONE` (no task per stream);
under another server a task watches `receive`. A send that fails means the same. A client
that stops reading is given up by the HTTP protocol after `write_timeout_seconds` (a send
waits at most that long for room, `gateway.http.flow`), and this sees it as a client that left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from gateway.chat.outcomes import ChatEvents
from gateway.http.openai_sse import SSE_CONTENT_TYPE
from gateway.http.protocol import CLIENT_GONE

__all__ = ["send_event_stream"]

_UNTOLD = object()
"""`CLIENT_GONE` absent: a server other than the gateway's protocol (a test client)."""

_HEADERS = [
    (b"content-type", SSE_CONTENT_TYPE.encode()),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


async def send_event_stream(
    scope: Any,
    events: ChatEvents,
    receive: Any,
    send: Any,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Send the events as they come (`extra`: more response headers)."""
    leaving: list[asyncio.Task[None]] = []
    watcher: asyncio.Task[None] | None = None
    told = scope.get(CLIENT_GONE, _UNTOLD)
    if told is None:  # the protocol calls this when the client is gone
        loop = asyncio.get_running_loop()
        scope[CLIENT_GONE] = lambda: leaving.append(loop.create_task(events.client_left()))
    elif told is True:  # gone already
        await events.client_left()
    else:  # a server that only tells `receive`
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
                if head is not None:  # with the first frame, or alone on an empty one
                    await send(head)
                    head = None
                if frame or finished:
                    body = {"type": "http.response.body", "body": frame, "more_body": not finished}
                    await send(body)
            except OSError:
                await events.client_left()
        if not events.gone and not finished:
            if head is not None:
                await send(head)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        if watcher is not None:
            watcher.cancel()
        elif told is None and scope[CLIENT_GONE] is not True:
            scope[CLIENT_GONE] = None
        for task in leaving:
            await task
        await events.close()


async def _watch(events: ChatEvents, receive: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            await events.client_left()
            return
