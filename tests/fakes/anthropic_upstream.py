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

`FakeAnthropic(check_thinking=True)` refuses, as the real API does (400
`invalid_request_error`, naming the block), a request with thinking enabled whose assistant
turns carry a thinking block with a signature it did not issue for that text (or redacted data
it did not issue), or whose last assistant turn continued by tool results does not start with
a thinking block; and a thinking budget below 1024 or not below `max_tokens`. It issues what
its answers carry, each signature with its text. `count_tokens` answers
`POST /v1/messages/count_tokens` (`{"input_tokens": N}`).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web

from tests.fakes.server import Disconnect, Dropped, FakeServer, RecordedRequest, drop, record

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
    "signature_of",
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


def signature_of(value: str) -> str:
    """The signature the fake gives a thinking text (opaque to clients, checked by the fake)."""
    return "sig-" + hashlib.sha256(value.encode()).hexdigest()[:32]


def thinking(value: str, signature: str = "sig-fake") -> dict[str, Any]:
    """A signed thinking block (`signature_of(value)` makes one of its own per text)."""
    return {"type": "thinking", "thinking": value, "signature": signature}


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


class FakeAnthropic(FakeServer[RecordedRequest, Reply | StreamReply | Disconnect]):
    """The Anthropic Messages fake (see `FakeServer`); `base_url` ends in `/v1`."""

    thread_name = "fake-anthropic"

    def __init__(self, *, check_thinking: bool = False, count_tokens: int = 42) -> None:
        super().__init__()
        self.check_thinking = check_thinking
        self.count_tokens = count_tokens
        self.issued: set[tuple[str, str]] = set()  # (signature, the thinking text it signs)
        self.issued_redacted: set[str] = set()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count)

    def issue(self, content: Sequence[Mapping[str, Any]]) -> None:
        """Take the signed blocks of `content` as issued (answers do it themselves; a test
        replaying recorded events calls it)."""
        for block in content:
            if block.get("type") == "thinking" and block.get("signature"):
                self.issued.add((block["signature"], block.get("thinking", "")))
            elif block.get("type") == "redacted_thinking" and block.get("data"):
                self.issued_redacted.add(block["data"])

    async def _count(self, request: web.Request) -> web.Response:
        self.requests.append(await record(request))
        return web.json_response({"input_tokens": self.count_tokens})

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        recorded = await record(request)
        self.requests.append(recorded)
        wants = recorded.json if isinstance(recorded.json, dict) else {}
        refusal = thinking_problem(wants, self) if self.check_thinking else None
        if refusal is not None:
            error = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": refusal},
            }
            return web.json_response(error, status=400)
        reply = self._script.popleft() if self._script else None
        if reply is None and self.bill is not None:
            billed_in, billed_out = self.bill(wants)
            whole = message(
                model=wants.get("model", "claude-fake"),
                input_tokens=billed_in,
                output_tokens=billed_out,
            )
            reply = StreamReply(message=whole) if wants.get("stream") else Reply(message=whole)
        if reply is None:
            reply = StreamReply() if wants.get("stream") else Reply()
        try:
            if isinstance(reply, StreamReply):
                return await self._stream(request, reply, wants)
            await asyncio.sleep(reply.delay)
            if isinstance(reply, Disconnect):
                drop(request)
            if isinstance(reply.message, Mapping):
                self.issue(reply.message.get("content") or [])
            return _whole(reply, wants)
        except Dropped:
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
            whole = reply.message or message(model=wants.get("model", "claude-fake"))
            self.issue(whole["content"])
            events = events_for(whole)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for index, event in enumerate(events):
            if reply.break_after is not None and index >= reply.break_after:
                drop(request)  # mid-body: close() still flushes what was written
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


def thinking_problem(request: Mapping[str, Any], issuer: FakeAnthropic) -> str | None:
    """What the real API refuses in a request with thinking enabled, as it words it; None when
    nothing (or thinking is off)."""
    config = request.get("thinking")
    if not isinstance(config, Mapping) or config.get("type") != "enabled":
        return None
    budget = config.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if budget >= int(request.get("max_tokens") or 0):
        return "`max_tokens` must be greater than `thinking.budget_tokens`."
    turns = request.get("messages") or []
    for i, turn in enumerate(turns):
        if turn.get("role") != "assistant" or not isinstance(turn.get("content"), list):
            continue
        for j, block in enumerate(turn["content"]):
            at = f"messages.{i}.content.{j}"
            kind = block.get("type")
            if kind == "thinking":
                if (block.get("signature"), block.get("thinking")) not in issuer.issued:
                    return f"{at}: Invalid `signature` in `thinking` block"
            elif kind == "redacted_thinking" and block.get("data") not in issuer.issued_redacted:
                return f"{at}: Invalid `data` in `redacted_thinking` block"
    return _unthought_continuation(turns)


def _unthought_continuation(turns: Sequence[Mapping[str, Any]]) -> str | None:
    """The last assistant turn, answered by tool results only, must start with thinking."""
    if not turns or turns[-1].get("role") != "user":
        return None
    last = turns[-1].get("content")
    if not isinstance(last, list) or not any(b.get("type") == "tool_result" for b in last):
        return None
    for i in range(len(turns) - 2, -1, -1):
        turn = turns[i]
        if turn.get("role") != "assistant":
            continue
        content = turn.get("content")
        first = content[0].get("type") if isinstance(content, list) and content else "text"
        if first not in ("thinking", "redacted_thinking"):
            return (
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{first}`. When `thinking` is enabled, a final `assistant` message "
                "must start with a thinking block (preceeding the lastmost set of `tool_use` "
                "and `tool_result` blocks)."
            )
        return None
    return None
