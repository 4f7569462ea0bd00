"""A fake OpenAI-compatible upstream: a real aiohttp server on 127.0.0.1 and a free port.

Adapters are pointed at `base_url` exactly as at the real thing, so the tests exercise the
real HTTP client, pool, timeouts and SSE parsing. Each test scripts what comes back:

    async with FakeOpenAI() as fake:                 # or: url, stop = fake.start_in_thread()
        fake.enqueue(Reply.error(429, "slow down"))  # next call: a 429, OpenAI error body
        fake.enqueue(StreamReply(break_after=2))     # then: a stream cut after 2 chunks
        ...                                          # then: default answers
        fake.requests[0].json["model"]; fake.requests[0].headers["authorization"]
        await fake.wait_for_disconnects(1)           # the client hung up mid-stream

Scripted replies are used in order, one per request; with none left, a request gets a default
completion (or a default stream when it asked for `stream: true`).
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
    "Disconnect",
    "FakeOpenAI",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "default_chunks",
    "default_completion",
    "default_embeddings",
]

DEFAULT_TEXT = "Hello from the fake upstream."


@dataclass(frozen=True)
class Reply:
    """A whole (non-stream) answer. `body`: None = default completion, dict/list = JSON,
    bytes/str = sent as is (for malformed-JSON tests)."""

    status: int = 200
    body: object = None
    delay: float = 0.0  # seconds before answering
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    @classmethod
    def error(
        cls, status: int, message: str, *, type: str = "invalid_request_error", delay: float = 0.0
    ) -> Reply:
        """An answer with OpenAI's error body shape."""
        error = {"message": message, "type": type, "param": None, "code": None}
        return cls(status=status, body={"error": error}, delay=delay)


@dataclass(frozen=True)
class StreamReply:
    """An SSE answer. `chunks`: None = default chunks for the request; dicts are sent as
    `data: <json>` events, bytes are written raw (to test framing)."""

    chunks: Sequence[Mapping[str, Any] | bytes] | None = None
    status: int = 200
    delay: float = 0.0  # seconds before the headers
    chunk_delay: float = 0.0  # seconds before each chunk
    break_after: int | None = None  # close the connection (no clean end) after this many chunks
    stall_after: int | None = None  # go silent (connection open) after this many chunks
    done: bool = True  # send `data: [DONE]` at the end


def default_completion(request: Mapping[str, Any], text: str = DEFAULT_TEXT) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": request.get("model", "fake-model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(),
        "system_fingerprint": "fp_fake",
    }


def default_embeddings(request: Mapping[str, Any]) -> dict[str, Any]:
    """An embeddings answer: the unit vector (0.6, 0.8) per input, 3 tokens each."""
    inputs = request.get("input")
    count = len(inputs) if isinstance(inputs, list) and not isinstance(inputs[0], int) else 1
    data = [{"object": "embedding", "index": i, "embedding": [0.6, 0.8]} for i in range(count)]
    usage = {"prompt_tokens": 3 * count, "total_tokens": 3 * count}
    return {"object": "list", "data": data, "model": request.get("model"), "usage": usage}


def default_chunks(request: Mapping[str, Any], text: str = DEFAULT_TEXT) -> list[dict[str, Any]]:
    """Role chunk, one chunk per word, finish chunk, and a usage chunk if include_usage."""
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": request.get("model", "fake-model"),
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice]}

    words = text.split(" ")
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
    chunks.append(chunk({}, "stop"))
    if (request.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": _usage()})
    return chunks


def _usage() -> dict[str, Any]:
    return {
        "prompt_tokens": 12,
        "completion_tokens": 6,
        "total_tokens": 18,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


_LARGE = 1 << 20
"""Bodies above this are written by the handler a MiB at a time (`FakeOpenAI._large`)."""


class FakeOpenAI(FakeServer[RecordedRequest, Reply | StreamReply | Disconnect]):
    """The OpenAI-compatible fake (see `FakeServer`); `base_url` ends in `/v1`. It serves
    `/chat/completions` and `/embeddings` (scripted replies are shared, in request order)."""

    thread_name = "fake-openai"

    def __init__(self, *, text: str = DEFAULT_TEXT) -> None:
        super().__init__()
        self.text = text
        self.in_flight = 0
        """Chat answers being made or sent now (a large one is sent by its handler)."""

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._chat)
        app.router.add_get("/v1/models", self._models)

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": "fake-model", "object": "model", "created": 0, "owned_by": "fake"}
        return web.json_response({"object": "list", "data": [model]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        recorded = await record(request)
        self.requests.append(recorded)
        wants = recorded.json if isinstance(recorded.json, dict) else {}
        reply = self._script.popleft() if self._script else None
        if reply is None and self.bill is not None:
            reply = self._billed(wants, *self.bill(wants))
        if reply is None:
            reply = StreamReply() if wants.get("stream") else Reply()
        try:
            if isinstance(reply, StreamReply):
                return await self._stream(request, reply, wants)
            await asyncio.sleep(reply.delay)
            if isinstance(reply, Disconnect):
                drop(request)
            return await self._whole(request, reply, wants)
        except Dropped:
            raise asyncio.CancelledError from None  # ends the handler without an answer
        except (ConnectionError, asyncio.CancelledError):
            self.disconnects += 1
            raise

    def _billed(
        self, wants: Mapping[str, Any], prompt: int, completion: int
    ) -> Reply | StreamReply:
        counts = {**_usage(), "prompt_tokens": prompt, "completion_tokens": completion}
        counts["total_tokens"] = prompt + completion
        if not wants.get("stream"):
            return Reply(body={**default_completion(wants, self.text), "usage": counts})
        chunks = default_chunks(wants, self.text)
        if chunks[-1].get("usage"):
            chunks[-1] = {**chunks[-1], "usage": counts}
        return StreamReply(chunks=chunks)

    async def _whole(
        self, request: web.Request, reply: Reply, wants: Mapping[str, Any]
    ) -> web.StreamResponse:
        body = reply.body
        if body is None and request.path.endswith("/embeddings"):
            body = default_embeddings(wants)
        elif body is None:
            body = default_completion(wants, self.text)
        if isinstance(body, str):
            body = body.encode()
        if not isinstance(body, bytes):
            body = msgspec.json.encode(body)
        if len(body) > _LARGE:
            return await self._large(request, reply, body)
        return web.Response(
            status=reply.status,
            body=body,
            headers=dict(reply.headers),
            content_type=reply.content_type,
        )

    async def _large(self, request: web.Request, reply: Reply, body: bytes) -> web.StreamResponse:
        """A large body with its length declared, written a MiB at a time by this handler: a
        client that leaves ends it at once (no copy of the whole body is left in a buffer)."""
        response = web.StreamResponse(status=reply.status, headers=dict(reply.headers))
        response.content_type = reply.content_type
        response.content_length = len(body)
        await response.prepare(request)
        view = memoryview(body)
        for start in range(0, len(body), _LARGE):
            await response.write(view[start : start + _LARGE])
        await response.write_eof()
        return response

    async def _stream(
        self, request: web.Request, reply: StreamReply, wants: Mapping[str, Any]
    ) -> web.StreamResponse:
        await asyncio.sleep(reply.delay)
        chunks = reply.chunks if reply.chunks is not None else default_chunks(wants, self.text)
        response = web.StreamResponse(
            status=reply.status,
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
        )
        await response.prepare(request)
        for index, chunk in enumerate(chunks):
            if reply.break_after is not None and index >= reply.break_after:
                drop(request)  # mid-body: close() still flushes what was written
            if reply.stall_after is not None and index >= reply.stall_after:
                await asyncio.sleep(3600)  # until the client gives up and disconnects
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            await response.write(chunk if isinstance(chunk, bytes) else _event(chunk))
        if reply.done:
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _event(chunk: Mapping[str, Any]) -> bytes:
    return b"data: " + msgspec.json.encode(chunk) + b"\n\n"
