"""A fake Gemini API: a real aiohttp server on 127.0.0.1 and a free port.

The adapter is pointed at `base_url` (ending in `/v1beta`) as at the real thing, and each test
scripts the answers with the wire shapes built here:

    async with FakeGemini() as fake:                 # or: url, stop = fake.start_in_thread()
        fake.enqueue(Reply(body=response(candidate(function_call("f", {"a": 1})))))
        fake.enqueue(Reply.error(429, "RESOURCE_EXHAUSTED", "quota", retry_delay="7s"))
        fake.enqueue(StreamReply(break_after=2))     # an SSE stream cut after 2 events
        fake.requests[0].json["contents"]; fake.requests[0].headers["x-goog-api-key"]
        fake.requests[1].path      # "/v1beta/models/<model>:streamGenerateContent?alt=sse"

Scripted replies are used in order, one per request; with none left, `:generateContent` gets
`response()` (the default text) and `:streamGenerateContent` the same text as `events_for()`.
Events are framed as Google frames them: `data: <json>\\r\\n\\r\\n`, no end marker.
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
    "FakeGemini",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "candidate",
    "error_body",
    "events_for",
    "function_call",
    "response",
    "text",
    "usage",
]

DEFAULT_TEXT = "Hello from the fake Gemini upstream."


def text(value: str, *, thought: bool = False, signature: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"text": value}
    if thought:
        part["thought"] = True
    if signature:
        part["thoughtSignature"] = signature
    return part


def function_call(
    name: str, args: Mapping[str, Any] | None = None, *, signature: str | None = None
) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": name, "args": dict(args or {})}}
    if signature:
        part["thoughtSignature"] = signature
    return part


def candidate(
    *parts: dict[str, Any], finish: str | None = "STOP", index: int = 0
) -> dict[str, Any]:
    """One candidate (default content: `DEFAULT_TEXT`); index 0 is omitted, as proto3 does."""
    out: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        out["finishReason"] = finish
    if index:
        out["index"] = index
    return out


def usage(
    prompt: int = 12, candidates: int = 6, *, thoughts: int = 0, cached: int = 0
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thoughts,
    }
    if thoughts:
        out["thoughtsTokenCount"] = thoughts
    if cached:
        out["cachedContentTokenCount"] = cached
    return out


def response(
    *candidates: dict[str, Any],
    usage_metadata: dict[str, Any] | None = None,
    model_version: str = "gemini-fake-001",
    prompt_feedback: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole GenerateContentResponse (default: one candidate saying `DEFAULT_TEXT`)."""
    out: dict[str, Any] = {
        "candidates": list(candidates) or [candidate(text(DEFAULT_TEXT))],
        "usageMetadata": usage() if usage_metadata is None else usage_metadata,
        "modelVersion": model_version,
        "responseId": "resp-fake",
    }
    if prompt_feedback is not None:
        out["promptFeedback"] = prompt_feedback
        if not candidates:
            del out["candidates"]
    return out


def events_for(value: str = DEFAULT_TEXT, final_usage: dict[str, Any] | None = None) -> list[Any]:
    """A text answer as Gemini streams it: one event per word, the prompt count in each
    event's usage and the full counts with the finishReason on the last."""
    words = value.split(" ")
    events: list[Any] = []
    for position, word in enumerate(words):
        last = position == len(words) - 1
        piece = candidate(text(word if position == 0 else " " + word), finish=None)
        event = response(piece, usage_metadata={"promptTokenCount": 12, "totalTokenCount": 12})
        if last:
            piece["finishReason"] = "STOP"
            event["usageMetadata"] = final_usage or usage()
        events.append(event)
    return events


def error_body(
    code: int,
    status: str,
    message: str,
    *,
    retry_delay: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Google's error body; `retry_delay` ("7s") adds a `google.rpc.RetryInfo` detail and
    `reason` ("API_KEY_INVALID") a `google.rpc.ErrorInfo`."""
    details: list[dict[str, Any]] = [
        {"@type": "type.googleapis.com/google.rpc.Help", "links": [{"url": "https://x"}]}
    ]
    if reason:
        details.insert(
            0,
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "googleapis.com",
            },
        )
    if retry_delay:
        details.append(
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
        )
    return {"error": {"code": code, "message": message, "status": status, "details": details}}


@dataclass(frozen=True)
class Reply:
    """A whole answer. `body`: None = `response()`, dict/list = JSON, bytes/str = sent as is."""

    status: int = 200
    body: object = None
    delay: float = 0.0  # seconds before answering
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    @classmethod
    def error(
        cls,
        code: int,
        status: str,
        message: str,
        *,
        retry_delay: str | None = None,
        reason: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        body = error_body(code, status, message, retry_delay=retry_delay, reason=reason)
        return cls(status=code, body=body, headers=dict(headers or {}))


@dataclass(frozen=True)
class StreamReply:
    """An SSE answer. `events`: None = `events_for()`; dicts are sent as `data:` events, bytes
    are written raw (to test framing)."""

    events: Sequence[Mapping[str, Any] | bytes] | None = None
    delay: float = 0.0  # seconds before the headers
    chunk_delay: float = 0.0  # seconds before each event
    break_after: int | None = None  # close the connection (no clean end) after this many events
    stall_after: int | None = None  # go silent (connection open) after this many events


class FakeGemini:
    """The server, its script and its records; `base_url` ends in `/v1beta`."""

    def __init__(self, *, text: str = DEFAULT_TEXT) -> None:
        self.text = text
        self.requests: list[RecordedRequest] = []  # `path` includes the query string
        self.disconnects = 0  # requests whose client went away before the answer ended
        self._script: deque[Reply | StreamReply | Disconnect] = deque()
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def base_url(self) -> str:
        if not self._port:
            raise RuntimeError("FakeGemini is not started")
        return f"http://127.0.0.1:{self._port}/v1beta"

    def enqueue(self, *replies: Reply | StreamReply | Disconnect) -> None:
        self._script.extend(replies)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1beta/{collection}/{call}", self._generate)
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

    async def __aenter__(self) -> FakeGemini:
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

        thread = threading.Thread(target=serve, name="fake-gemini", daemon=True)
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

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            decoded: Any = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            decoded = None
        headers = {name.lower(): value for name, value in request.headers.items()}
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.requests.append(
            RecordedRequest(
                request.method, request.path_qs, headers, raw, decoded, peer[1] if peer else 0
            )
        )
        method = request.match_info["call"].rpartition(":")[2]
        if method not in ("generateContent", "streamGenerateContent"):
            body = error_body(404, "NOT_FOUND", f"Method {method!r} not found.")
            return web.json_response(body, status=404)
        reply = self._script.popleft() if self._script else None
        if reply is None:
            reply = StreamReply() if method == "streamGenerateContent" else Reply()
        try:
            if isinstance(reply, StreamReply):
                return await self._stream(request, reply)
            await asyncio.sleep(reply.delay)
            if isinstance(reply, Disconnect):
                _drop(request)
            return self._whole(reply)
        except _Dropped:
            raise asyncio.CancelledError from None  # ends the handler without an answer
        except (ConnectionError, asyncio.CancelledError):
            self.disconnects += 1
            raise

    def _whole(self, reply: Reply) -> web.Response:
        body = reply.body if reply.body is not None else response(candidate(text(self.text)))
        if isinstance(body, str):
            body = body.encode()
        if not isinstance(body, bytes):
            body = msgspec.json.encode(body)
        return web.Response(
            status=reply.status,
            body=body,
            headers=dict(reply.headers),
            content_type=reply.content_type,
        )

    async def _stream(self, request: web.Request, reply: StreamReply) -> web.StreamResponse:
        await asyncio.sleep(reply.delay)
        events = reply.events if reply.events is not None else events_for(self.text)
        stream = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        for index, event in enumerate(events):
            if reply.break_after is not None and index >= reply.break_after:
                _drop(request)  # mid-body: close() still flushes what was written
            if reply.stall_after is not None and index >= reply.stall_after:
                await asyncio.sleep(3600)  # until the client gives up and disconnects
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            if isinstance(event, bytes):
                await stream.write(event)
            else:
                await stream.write(b"data: " + msgspec.json.encode(event) + b"\r\n\r\n")
        await stream.write_eof()
        return stream


class _Dropped(Exception):
    """We closed the connection on purpose (not a client disconnect)."""


def _drop(request: web.Request) -> NoReturn:
    transport = request.transport
    if transport is not None:
        transport.close()
    raise _Dropped
