"""`send_event_stream`: the SSE response of a streamed chat, over plain ASGI callables.

The events are a stand-in for the chat service's (`ChatEvents`): it yields frames when the test
lets it, and records whether the client was noticed leaving and whether it was closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from gateway.http.event_stream import send_event_stream
from gateway.http.protocol import CLIENT_GONE


class FakeEvents:
    def __init__(self, frames: list[bytes], *, marks_last: bool = True) -> None:
        self.frames = frames
        self.marks_last = marks_last
        self.gate = asyncio.Event()
        self.gone = False
        self.ended = False
        self.closed = 0
        self.yielded = 0

    async def events(self) -> AsyncIterator[bytes]:
        for i, frame in enumerate(self.frames):
            if i == 1:
                await self.gate.wait()  # the second frame waits until the test lets it go
            if self.gone:
                return
            self.yielded += 1
            self.ended = self.marks_last and i == len(self.frames) - 1
            yield frame

    async def client_left(self) -> None:
        self.gone = True
        self.gate.set()
        await self.close()

    async def close(self) -> None:
        self.closed += 1


def _sent(marks_last: bool) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        events = FakeEvents([b"data: 1\n\n", b"data: [DONE]\n\n"], marks_last=marks_last)
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            await asyncio.Event().wait()  # the client stays
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message.get("body") == b"data: 1\n\n":
                events.gate.set()

        await send_event_stream({}, events, receive, send)
        assert events.closed >= 1 and not events.gone
        return sent

    sent = asyncio.run(main())
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    assert dict(sent[0]["headers"])[b"content-type"] == b"text/event-stream; charset=utf-8"
    return sent[1:]


def test_frames_are_sent_as_they_come_and_the_last_ends_the_body() -> None:
    sent = _sent(marks_last=True)
    assert [(m["body"], m["more_body"]) for m in sent] == [
        (b"data: 1\n\n", True),
        (b"data: [DONE]\n\n", False),
    ]


def test_a_stream_that_does_not_mark_its_last_frame_ends_with_an_empty_body() -> None:
    sent = _sent(marks_last=False)
    assert [(m["body"], m["more_body"]) for m in sent] == [
        (b"data: 1\n\n", True),
        (b"data: [DONE]\n\n", True),
        (b"", False),
    ]


def test_a_client_that_disconnects_stops_the_stream() -> None:
    async def main() -> None:
        events = FakeEvents([b"data: 1\n\n", b"data: 2\n\n"])
        sent: list[dict[str, Any]] = []
        disconnected = asyncio.Event()

        async def receive() -> dict[str, Any]:
            await disconnected.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message.get("body") == b"data: 1\n\n":
                disconnected.set()

        await send_event_stream({}, events, receive, send)
        assert events.gone and events.closed >= 1 and events.yielded == 1
        # No frame after the client left, and no end of body either.
        assert [m.get("body") for m in sent[1:]] == [b"data: 1\n\n"]

    asyncio.run(main())


def test_a_failed_send_counts_as_the_client_leaving() -> None:
    async def main() -> None:
        events = FakeEvents([b"data: 1\n\n", b"data: 2\n\n"])

        async def receive() -> dict[str, Any]:
            await asyncio.Event().wait()
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            if message.get("body"):
                raise OSError("connection reset")

        await send_event_stream({}, events, receive, send)
        assert events.gone and events.closed >= 1

    asyncio.run(main())


def test_the_protocol_tells_of_the_client_leaving_with_no_task_reading_receive() -> None:
    """Under the gateway's protocol (`CLIENT_GONE` in the scope) the stream is stopped by the
    callable it put there, and `receive` is never read; the key is let go when it ends."""

    async def main() -> None:
        events = FakeEvents([b"data: 1\n\n", b"data: 2\n\n"])
        sent: list[dict[str, Any]] = []
        scope: dict[str, Any] = {CLIENT_GONE: None}

        async def receive() -> dict[str, Any]:
            raise AssertionError("the protocol tells; receive is not watched")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message.get("body") == b"data: 1\n\n":
                told = scope[CLIENT_GONE]
                scope[CLIENT_GONE] = True
                told()  # as `gateway.http.protocol` does when the connection is lost

        await send_event_stream(scope, events, receive, send)
        assert events.gone and events.closed >= 1 and events.yielded == 1
        assert [m.get("body") for m in sent[1:]] == [b"data: 1\n\n"]
        assert scope[CLIENT_GONE] is True

        finished: dict[str, Any] = {CLIENT_GONE: None}
        events = FakeEvents([b"data: 1\n\n"])
        events.gate.set()
        await send_event_stream(finished, events, receive, lambda m: asyncio.sleep(0))
        assert not events.gone and finished[CLIENT_GONE] is None, "nothing kept past its end"

    asyncio.run(main())


def test_a_client_gone_before_the_stream_began_stops_it_at_once() -> None:
    async def main() -> None:
        events = FakeEvents([b"data: 1\n\n", b"data: 2\n\n"])
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await send_event_stream({CLIENT_GONE: True}, events, receive, send)
        assert events.gone and events.yielded == 0
        assert [m.get("body") for m in sent[1:]] == []

    asyncio.run(main())


def test_an_empty_frame_sends_the_head_alone_and_a_whole_stream_goes_in_one_body() -> None:
    """`b""` (the stream is about to wait on its upstream with no frame ready) sends the head
    and no body part; a stream that yields once, whole, sends its head with that frame."""

    async def main() -> None:
        events = FakeEvents([b"", b"data: 1\n\n"])
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            await asyncio.Event().wait()
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message["type"] == "http.response.start":
                assert events.yielded == 1, "the head goes out before the wait, not after"
                events.gate.set()

        await send_event_stream({CLIENT_GONE: None}, events, receive, send)
        assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
        assert sent[1]["body"] == b"data: 1\n\n" and not sent[1]["more_body"]

        whole = FakeEvents([b"data: 1\n\ndata: [DONE]\n\n"])
        sent.clear()

        async def keep(message: dict[str, Any]) -> None:
            sent.append(message)

        await send_event_stream({CLIENT_GONE: None}, whole, receive, keep)
        assert [(m["type"], m.get("more_body")) for m in sent] == [
            ("http.response.start", None),
            ("http.response.body", False),
        ]

    asyncio.run(main())
