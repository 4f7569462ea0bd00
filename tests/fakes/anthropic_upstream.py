"""A fake Anthropic Messages API: a real aiohttp server on 127.0.0.1 and a free port.

The adapter is pointed at `base_url` as at the real thing. Each test scripts the answers:

    async with FakeAnthropic() as fake:                    # or: url, stop = fake.start_in_thread()
        fake.enqueue(Reply(message=message(tool_use("toolu_1", "f", {"a": 1}))))
        fake.enqueue(Reply.error(529, "overloaded_error", "Overloaded"))
        fake.enqueue(StreamReply(break_after=4))           # an SSE stream cut after 4 events
        fake.requests[0].json["system"]; fake.requests[0].headers["x-api-key"]

Scripted replies are used in order, one per request; with none left a request gets the default
message (text), as a stream when it asked for `stream: true`. Streams follow Anthropic's event
sequence: message_start, ping, per block content_block_start / deltas / content_block_stop,
message_delta, message_stop (`events_for(message)`).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import msgspec
from aiohttp import web

from tests.fakes.openai_upstream import Disconnect, RecordedRequest

__all__ = [
    "DEFAULT_TEXT",
    "Disconnect",
    "FakeAnthropic",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "error_event",
    "events_for",
    "message",
    "sse",
    "text",
    "thinking",
    "tool_use",
]

DEFAULT_TEXT = "Hello from the fake Anthropic upstream."


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "sig-fake"}


def message(
    *content: dict[str, Any],
    stop_reason: str = "end_turn",
    model: str = "claude-fake",
    input_tokens: int = 12,
    output_tokens: int = 6,
    cache_read: int = 0,
    cache_creation: int = 0,
) -> dict[str, Any]:
    """A whole Messages API answer (default content: `DEFAULT_TEXT`)."""
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content) or [text(DEFAULT_TEXT)],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_creation,
            "cache_read_input_tokens": cache_read,
        },
    }


def events_for(whole: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stream Anthropic sends for `whole`: text and thinking in word pieces, tool input as
    JSON fragments (after the empty one Anthropic starts with), usage split as it does."""
    usage = dict(whole["usage"])
    start = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(whole["content"]):
        kind = block["type"]
        if kind == "text":
            opened, deltas = text(""), _pieces(block["text"], "text_delta", "text")
        elif kind == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = _pieces(block["thinking"], "thinking_delta", "thinking")
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            opened = {**block, "input": {}}
            arguments = msgspec.json.encode(block["input"]).decode()
            fragments = ["", *(arguments[i : i + 7] for i in range(0, len(arguments), 7))]
            deltas = [{"type": "input_json_delta", "partial_json": f} for f in fragments]
        events.append({"type": "content_block_start", "index": index, "content_block": opened})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    events.append(
        {
            "type": "message_delta",
            "delta": delta,
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return events


def _pieces(value: str, kind: str, key: str) -> list[dict[str, Any]]:
    words = value.split(" ")
    return [{"type": kind, key: w if i == 0 else " " + w} for i, w in enumerate(words)]


@dataclass(frozen=True)
class Reply:
    """A whole answer: `message` (None = the default one), or `body` sent as is (dict/list as
    JSON, bytes/str raw) for errors and malformed answers."""

    message: Mapping[str, Any] | None = None
    status: int = 200
    body: object = None
    delay: float = 0.0  # seconds before answering (a slow first byte)
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    @classmethod
    def error(
        cls, status: int, type: str, message: str, *, headers: Mapping[str, str] | None = None
    ) -> Reply:
        """An answer with Anthropic's error body: `{"type": "error", "error": {...}}`."""
        body = {"type": "error", "error": {"type": type, "message": message}}
        return cls(status=status, body=body, headers=headers or {})


@dataclass(frozen=True)
class StreamReply:
    """An SSE answer. `events`: None = `events_for(message or the default)`; dicts are sent as
    `event: <type>` + `data: <json>`, bytes are written raw (framing tests)."""

    message: Mapping[str, Any] | None = None
    events: Sequence[Mapping[str, Any] | bytes] | None = None
    delay: float = 0.0  # seconds before the headers
    event_delay: float = 0.0  # seconds before each event
    break_after: int | None = None  # close the connection after this many events
    stall_after: int | None = None  # go silent (connection open) after this many events


def error_event(type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type, "message": message}}


class FakeAnthropic:
    """The server, its script and its records. Start it with `async with` (in the test's loop)
    or `start_in_thread()` (its own loop, for sync tests); `base_url` ends in `/v1`."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0  # requests whose client went away before the answer ended
        self._script: deque[Reply | StreamReply | Disconnect] = deque()
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def base_url(self) -> str:
        if not self._port:
            raise RuntimeError("FakeAnthropic is not started")
        return f"http://127.0.0.1:{self._port}/v1"

    def enqueue(self, *replies: Reply | StreamReply | Disconnect) -> None:
        self._script.extend(replies)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        self._runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=0.1
        )
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", 0))
            await web.SockSite(self._runner, sock).start()
        except BaseException:
            sock.close()
            await self.stop()
            raise
        self._port = sock.getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeAnthropic:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def start_in_thread(self) -> tuple[str, Callable[[], None]]:
        """Serve from a daemon thread with its own loop; returns `base_url` and `stop()`."""
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        thread = threading.Thread(target=serve, name="fake-anthropic", daemon=True)
        thread.start()
        started.wait(10)
        if failure:
            raise failure[0]

        def stop() -> None:
            if thread.is_alive():
                loop.call_soon_threadsafe(loop.stop)
                thread.join(10)

        return self.base_url, stop

    async def wait_for_disconnects(self, count: int = 1, within: float = 2.0) -> None:
        """Until `disconnects >= count`; AssertionError after `within` seconds."""
        deadline = time.monotonic() + within
        while self.disconnects < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"saw {self.disconnects} disconnects, wanted {count}")
            await asyncio.sleep(0.005)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            decoded: Any = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            decoded = None
        headers = {name.lower(): value for name, value in request.headers.items()}
        peer = request.transport.get_extra_info("peername") if request.transport else None
        port = peer[1] if peer else 0
        self.requests.append(
            RecordedRequest(request.method, request.path, headers, raw, decoded, port)
        )
        wants = decoded if isinstance(decoded, dict) else {}
        reply = self._script.popleft() if self._script else None
        if reply is None:
            reply = StreamReply() if wants.get("stream") else Reply()
        try:
            if isinstance(reply, StreamReply):
                return await self._stream(request, reply, wants)
            await asyncio.sleep(reply.delay)
            if isinstance(reply, Disconnect):
                _drop(request)
            return _whole(reply, wants)
        except _Dropped:
            raise asyncio.CancelledError from None  # ends the handler without an answer
        except (ConnectionError, asyncio.CancelledError):
            self.disconnects += 1
            raise

    async def _stream(
        self, request: web.Request, reply: StreamReply, wants: Mapping[str, Any]
    ) -> web.StreamResponse:
        await asyncio.sleep(reply.delay)
        events = reply.events
        if events is None:
            events = events_for(reply.message or message(model=wants.get("model", "claude-fake")))
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for index, event in enumerate(events):
            if reply.break_after is not None and index >= reply.break_after:
                _drop(request)  # mid-body: close() still flushes what was written
            if reply.stall_after is not None and index >= reply.stall_after:
                await asyncio.sleep(3600)  # until the client gives up and disconnects
            if reply.event_delay:
                await asyncio.sleep(reply.event_delay)
            await response.write(event if isinstance(event, bytes) else sse(event))
        await response.write_eof()
        return response


def sse(event: Mapping[str, Any]) -> bytes:
    """One event as Anthropic frames it: an `event:` line naming its type, then `data:`."""
    name = str(event.get("type", "")).encode()
    return b"event: " + name + b"\ndata: " + msgspec.json.encode(event) + b"\n\n"


def _whole(reply: Reply, wants: Mapping[str, Any]) -> web.Response:
    body = reply.body
    if body is None:
        body = reply.message or message(model=wants.get("model", "claude-fake"))
    if isinstance(body, str):
        body = body.encode()
    if not isinstance(body, bytes):
        body = msgspec.json.encode(body)
    return web.Response(
        status=reply.status, body=body, headers=dict(reply.headers), content_type=reply.content_type
    )


class _Dropped(Exception):
    """We closed the connection on purpose (not a client disconnect)."""


def _drop(request: web.Request) -> NoReturn:
    transport = request.transport
    if transport is not None:
        transport.close()
    raise _Dropped
