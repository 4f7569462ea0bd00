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
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import msgspec
from aiohttp import web

__all__ = [
    "Disconnect",
    "FakeOpenAI",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "default_chunks",
    "default_completion",
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


@dataclass(frozen=True)
class Disconnect:
    """Close the connection without any answer (after `delay` seconds)."""

    delay: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    json: Any  # the decoded body, or None when it was not JSON
    client_port: int  # the same port on two requests means a reused keep-alive connection


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


class FakeOpenAI:
    """The server, its script and its records. Start it with `async with` (in the test's loop)
    or `start_in_thread()` (its own loop, for sync tests); `base_url` ends in `/v1`."""

    def __init__(self, *, text: str = DEFAULT_TEXT) -> None:
        self.text = text
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0  # requests whose client went away before the answer ended
        self._script: deque[Reply | StreamReply | Disconnect] = deque()
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def base_url(self) -> str:
        if not self._port:
            raise RuntimeError("FakeOpenAI is not started")
        return f"http://127.0.0.1:{self._port}/v1"

    def enqueue(self, *replies: Reply | StreamReply | Disconnect) -> None:
        self._script.extend(replies)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
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

    async def __aenter__(self) -> FakeOpenAI:
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

        thread = threading.Thread(target=serve, name="fake-openai", daemon=True)
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

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": "fake-model", "object": "model", "created": 0, "owned_by": "fake"}
        return web.json_response({"object": "list", "data": [model]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            decoded: Any = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            decoded = None
        headers = {name.lower(): value for name, value in request.headers.items()}
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.requests.append(
            RecordedRequest(
                request.method, request.path, headers, raw, decoded, peer[1] if peer else 0
            )
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
            return self._whole(reply, wants)
        except _Dropped:
            raise asyncio.CancelledError from None  # ends the handler without an answer
        except (ConnectionError, asyncio.CancelledError):
            self.disconnects += 1
            raise

    def _whole(self, reply: Reply, wants: Mapping[str, Any]) -> web.Response:
        body = reply.body if reply.body is not None else default_completion(wants, self.text)
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
                _drop(request)  # mid-body: close() still flushes what was written
            if reply.stall_after is not None and index >= reply.stall_after:
                await asyncio.sleep(3600)  # until the client gives up and disconnects
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            await response.write(chunk if isinstance(chunk, bytes) else _event(chunk))
        if reply.done:
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


class _Dropped(Exception):
    """We closed the connection on purpose (not a client disconnect)."""


def _event(chunk: Mapping[str, Any]) -> bytes:
    return b"data: " + msgspec.json.encode(chunk) + b"\n\n"


def _drop(request: web.Request) -> NoReturn:
    transport = request.transport
    if transport is not None:
        transport.close()
    raise _Dropped
