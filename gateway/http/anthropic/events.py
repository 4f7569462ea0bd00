"""Anthropic's stream framing (`gateway.chat.framing.StreamFramer`): `event: <type>` and
`data: <json>` per event, one framer per stream.

`MessageEventFramer` makes Anthropic's events from chat.completion.chunks (an upstream of
another format): `message_start` with the first chunk (its input counts as the upstream
reported them by then, `opening_usage`; 0 from an upstream that reports them only at the end),
then content blocks opened and closed
as the deltas change kind (thinking, text, each tool call), and at the end `message_delta`
(the stop reason, the usage with the gateway's credits) and `message_stop`.

`NativeEventFramer` passes an Anthropic upstream's events as they came, with the gateway's id
and model in `message_start`; it holds back `message_delta` and `message_stop` until the call
is settled, so that the last `message_delta` carries the credits charged.

A stream that breaks after it began ends with an `error` event in Anthropic's shape
(`gateway.http.anthropic.errors`), without `message_stop`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.errors import GatewayError
from gateway.http.anthropic.answer import anthropic_usage, stop_reason
from gateway.http.anthropic.errors import error_body
from gateway.http.openai_sse import SSE_CONTENT_TYPE
from providers.base import Usage

__all__ = ["MessageEventFramer", "NativeEventFramer", "event_frame"]

_encode = msgspec.json.Encoder().encode
_STOP = b"event: message_stop\ndata: " + _encode({"type": "message_stop"}) + b"\n\n"
_CREDITS = ("credits", "credits_usd_reference")
_NO_INPUT = {"input_tokens": 0}


def event_frame(event: dict[str, Any]) -> bytes:
    kind = event.get("type")
    name = kind.encode() if isinstance(kind, str) else b"message"
    return b"event: " + name + b"\ndata: " + _encode(event) + b"\n\n"


def _credits(usage_chunk: dict[str, Any] | None) -> dict[str, Any]:
    usage = (usage_chunk or {}).get("usage") or {}
    return {name: usage[name] for name in _CREDITS if name in usage}


class MessageEventFramer:
    """Chat.completion.chunks -> Anthropic's events (see the module docstring)."""

    content_type = SSE_CONTENT_TYPE
    wants_usage = True

    __slots__ = ("_index", "_input", "_open", "_started", "_stop", "_tools")

    def __init__(self) -> None:
        self._input: dict[str, int] = _NO_INPUT
        self._started = False
        self._index = -1  # the last block opened
        self._open: str | None = None  # the kind of the block open now
        self._tools: dict[int, int] = {}  # tool call index -> its block index
        self._stop = "end_turn"

    def opening_usage(self, usage: Usage | None) -> None:
        """The counts the upstream reported before the first chunk, for `message_start`."""
        if usage is not None and usage.prompt_tokens:
            cached, written = usage.cached_tokens, usage.cache_creation_tokens
            self._input = {
                "input_tokens": max(usage.prompt_tokens - cached - written, 0),
                "cache_creation_input_tokens": written,
                "cache_read_input_tokens": cached,
            }

    def chunk(self, chunk: dict[str, Any]) -> bytes | None:
        out: list[bytes] = []
        if not self._started:
            self._start(chunk, out)
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            self._delta(delta, out)
            finish = choice.get("finish_reason")
            if finish:
                self._stop = stop_reason(finish)
        return b"".join(out) if out else None

    def _start(self, chunk: dict[str, Any], out: list[bytes]) -> None:
        self._started = True
        message = {
            "id": chunk.get("id", ""),
            "type": "message",
            "role": "assistant",
            "model": chunk.get("model", ""),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**self._input, "output_tokens": 0},
        }
        out.append(event_frame({"type": "message_start", "message": message}))

    def _delta(self, delta: dict[str, Any], out: list[bytes]) -> None:
        reasoning = delta.get("reasoning_content")
        if reasoning:
            self._ensure("thinking", {"type": "thinking", "thinking": "", "signature": ""}, out)
            self._block_delta({"type": "thinking_delta", "thinking": reasoning}, out)
        for block in delta.get("thinking_blocks") or ():
            self._signed(block, out)
        content = delta.get("content")
        if content:
            self._ensure("text", {"type": "text", "text": ""}, out)
            self._block_delta({"type": "text_delta", "text": content}, out)
        for call in delta.get("tool_calls") or ():
            self._tool_call(call, out)

    def _signed(self, block: dict[str, Any], out: list[bytes]) -> None:
        """A whole signed block, as an adapter sends it when the block ended."""
        if block.get("type") == "thinking":
            if self._open != "thinking":
                self._open_block("thinking", {**block, "thinking": "", "signature": ""}, out)
                text = block.get("thinking") or ""
                self._block_delta({"type": "thinking_delta", "thinking": text}, out)
            signature = block.get("signature") or ""
            self._block_delta({"type": "signature_delta", "signature": signature}, out)
            self._close(out)
        elif block.get("type") == "redacted_thinking":
            self._open_block("redacted_thinking", dict(block), out)
            self._close(out)

    def _tool_call(self, call: dict[str, Any], out: list[bytes]) -> None:
        position = call.get("index", 0)
        function = call.get("function") or {}
        index = self._tools.get(position)
        if index is None:
            block = {"type": "tool_use", "id": call.get("id"), "name": function.get("name")}
            self._open_block("tool_use", {**block, "input": {}}, out)
            index = self._tools[position] = self._index
        arguments = function.get("arguments")
        if arguments:
            delta = {"type": "input_json_delta", "partial_json": arguments}
            out.append(event_frame({"type": "content_block_delta", "index": index, "delta": delta}))

    def _ensure(self, kind: str, block: dict[str, Any], out: list[bytes]) -> None:
        if self._open != kind:
            self._open_block(kind, block, out)

    def _open_block(self, kind: str, block: dict[str, Any], out: list[bytes]) -> None:
        self._close(out)
        self._index += 1
        self._open = kind
        start = {"type": "content_block_start", "index": self._index, "content_block": block}
        out.append(event_frame(start))

    def _block_delta(self, delta: dict[str, Any], out: list[bytes]) -> None:
        event = {"type": "content_block_delta", "index": self._index, "delta": delta}
        out.append(event_frame(event))

    def _close(self, out: list[bytes]) -> None:
        if self._open is not None:
            self._open = None
            out.append(event_frame({"type": "content_block_stop", "index": self._index}))

    def error(self, error: GatewayError, request_id: str) -> bytes:
        return b"event: error\ndata: " + error_body(error, request_id) + b"\n\n"

    def end(self, usage: dict[str, Any] | None) -> bytes:
        out: list[bytes] = []
        if not self._started:
            self._start(usage or {}, out)
        self._close(out)
        delta = {"stop_reason": self._stop, "stop_sequence": None}
        counts = anthropic_usage((usage or {}).get("usage") or {})
        out.append(event_frame({"type": "message_delta", "delta": delta, "usage": counts}))
        out.append(_STOP)
        return b"".join(out)


class NativeEventFramer:
    """An Anthropic upstream's events, passed on (see the module docstring)."""

    content_type = SSE_CONTENT_TYPE
    wants_usage = True

    __slots__ = ("_call_id", "_delta", "_model")

    def __init__(self, *, call_id: str, model: str) -> None:
        self._call_id = call_id
        self._model = model
        self._delta: dict[str, Any] | None = None

    def chunk(self, chunk: dict[str, Any]) -> bytes | None:
        kind = chunk.get("type")
        if kind == "message_start":
            message = chunk.get("message")
            if isinstance(message, dict):
                message["id"] = self._call_id
                message["model"] = self._model
        elif kind == "message_delta":
            self._delta = chunk
            return None
        elif kind == "message_stop":
            return None
        return event_frame(chunk)

    def error(self, error: GatewayError, request_id: str) -> bytes:
        return b"event: error\ndata: " + error_body(error, request_id) + b"\n\n"

    def end(self, usage: dict[str, Any] | None) -> bytes:
        delta = self._delta
        if delta is None:  # the stream ended after its stop reason without this event
            delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}
        counts = delta.get("usage")
        delta["usage"] = {**(counts if isinstance(counts, dict) else {}), **_credits(usage)}
        return event_frame(delta) + _STOP
