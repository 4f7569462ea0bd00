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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web

from tests.fakes.server import Disconnect, Dropped, FakeServer, RecordedRequest, drop, record

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


_METHODS = ("generateContent", "streamGenerateContent", "batchEmbedContents", "embedContent")


class FakeGemini(FakeServer[RecordedRequest, Reply | StreamReply | Disconnect]):
    """The Gemini fake (see `FakeServer`); `base_url` ends in `/v1beta`; a recorded request's
    `path` includes the query string."""

    base_path = "/v1beta"
    thread_name = "fake-gemini"

    def __init__(self, *, text: str = DEFAULT_TEXT) -> None:
        super().__init__()
        self.text = text

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1beta/{collection}/{call}", self._generate)

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await record(request, request.path_qs))
        method = request.match_info["call"].rpartition(":")[2]
        if method not in _METHODS:
            body = error_body(404, "NOT_FOUND", f"Method {method!r} not found.")
            return web.json_response(body, status=404)
        reply = self._script.popleft() if self._script else None
        wants = self.requests[-1].json
        if reply is None and self.bill is not None and isinstance(wants, dict):
            counts = usage(*self.bill(wants))
            if method == "streamGenerateContent":
                reply = StreamReply(events=events_for(self.text, final_usage=counts))
            else:
                reply = Reply(body=response(candidate(text(self.text)), usage_metadata=counts))
        if reply is None:
            reply = StreamReply() if method == "streamGenerateContent" else Reply()
        try:
            if isinstance(reply, StreamReply):
                return await self._stream(request, reply)
            await asyncio.sleep(reply.delay)
            if isinstance(reply, Disconnect):
                drop(request)
            return self._whole(reply, method)
        except Dropped:
            raise asyncio.CancelledError from None  # ends the handler without an answer
        except (ConnectionError, asyncio.CancelledError):
            self.disconnects += 1
            raise

    def _whole(self, reply: Reply, method: str = "generateContent") -> web.Response:
        body = reply.body
        if body is None and method == "batchEmbedContents":
            count = len(self.requests[-1].json.get("requests") or [])
            body = {"embeddings": [{"values": [0.6, 0.8]}] * count}
        elif body is None and method == "embedContent":
            body = {"embedding": {"values": [0.6, 0.8]}}
        elif body is None:
            body = response(candidate(text(self.text)))
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
                drop(request)  # mid-body: close() still flushes what was written
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
