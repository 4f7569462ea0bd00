"""Anthropic answers -> the gateway's OpenAI shapes: a whole message, or stream events.

    text blocks       -> message.content (joined), or delta.content
    tool_use blocks   -> message.tool_calls (arguments a JSON string, "{}" for none), or
                         tool_calls deltas (a call that streamed no argument gets "{}" when
                         its block stops)
    thinking blocks   -> message.reasoning_content, or delta.reasoning_content; and each
                         signed block whole in `thinking_blocks` ({type: thinking, thinking,
                         signature}), in a stream as one delta when the block stops, so the
                         client can send it back (`providers.anthropic.thinking`)
    redacted_thinking -> `thinking_blocks` ({type: redacted_thinking, data})
    other blocks      skipped (server tools' blocks, citations)
    stop_reason       end_turn, stop_sequence, pause_turn -> stop; max_tokens,
                      model_context_window_exceeded -> length; tool_use -> tool_calls;
                      refusal -> content_filter
    usage             prompt_tokens = input + cache_read + cache_creation; cached_tokens =
                      cache_read; cache_creation_tokens = cache_creation

A stream's role chunk goes out with its first content (or its finish): an error event right
after `message_start`, as Anthropic sends when overloaded, then still fails `stream()` and the
gateway can fall back.
"""

from __future__ import annotations

import time
from collections.abc import MutableSequence
from typing import Any

import msgspec

from providers.anthropic.errors import error_event
from providers.anthropic.wire import Event, Message, MessageUsage
from providers.base import ChatCompletion, Usage
from providers.errors import ProviderError

__all__ = ["StreamTranslator", "completion_from_bytes", "finish_reason", "openai_usage"]

_decode_message = msgspec.json.Decoder(Message).decode
_decode_event = msgspec.json.Decoder(Event).decode
_encode = msgspec.json.encode

_Sink = MutableSequence[dict[str, Any]]  # a list, or the stream's deque

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def finish_reason(stop_reason: str | None) -> str:
    return _FINISH.get(stop_reason or "", "stop")


def openai_usage(usage: MessageUsage) -> tuple[dict[str, Any], Usage]:
    """The OpenAI `usage` object and its counts, cache reads and writes included."""
    counts = _counts(usage, partial=False)
    body = {
        "prompt_tokens": counts.prompt_tokens,
        "completion_tokens": counts.completion_tokens,
        "total_tokens": counts.total_tokens,
        "prompt_tokens_details": {
            "cached_tokens": counts.cached_tokens,
            "cache_creation_tokens": counts.cache_creation_tokens,
        },
    }
    return body, counts


def _counts(usage: MessageUsage, *, partial: bool) -> Usage:
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    prompt = (usage.input_tokens or 0) + cache_read + cache_write
    completion = usage.output_tokens or 0
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cached_tokens=cache_read,
        cache_creation_tokens=cache_write,
        partial=partial,
    )


def _arguments(value: Any) -> str:
    return _encode(value if value is not None else {}).decode()


def completion_from_bytes(raw: bytes) -> ChatCompletion:
    """A `chat.completion` from a whole message; ProviderError when it is not one."""
    try:
        message = _decode_message(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProviderError(f"upstream sent malformed JSON: {exc}") from exc
    if message.type == "error":
        raise error_event(message.error)
    if message.type != "message":
        raise ProviderError(f"upstream answer is a {message.type!r}, not a message")
    texts: list[str] = []
    thinking: list[str] = []
    signed: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        kind = block.type
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            function = {"name": block.name, "arguments": _arguments(block.input)}
            calls.append({"id": block.id, "type": "function", "function": function})
        elif kind == "thinking":
            thinking.append(block.thinking)
            if block.signature:
                signed.append(_thinking_block(block.thinking, block.signature))
        elif kind == "redacted_thinking" and block.data:
            signed.append(_redacted_block(block.data))
    out: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": None,
    }
    if thinking:
        out["reasoning_content"] = "".join(thinking)
    if signed:
        out["thinking_blocks"] = signed
    if calls:
        out["tool_calls"] = calls
    usage_body, usage = openai_usage(message.usage)
    choice = {
        "index": 0,
        "message": out,
        "logprobs": None,
        "finish_reason": finish_reason(message.stop_reason),
    }
    body = {
        "id": message.id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": message.model,
        "choices": [choice],
        "usage": usage_body,
    }
    return ChatCompletion(body=body, usage=usage)


def _thinking_block(thinking: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def _redacted_block(data: str) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


class StreamTranslator:
    """Per-stream state: each event's data -> zero or more chunks appended to `out`.

    `usage` is set at `message_delta` (final counts). Before it, `usage_so_far()` gives what
    `message_start` reported (the whole prompt, cache reads and writes, the first output
    tokens), `partial`: the gateway charges a stream cut short from it and from the output
    it delivered (`gateway.chat.usage`). `finished` records that a stop_reason arrived (a
    stream cut after it still counts as complete); `stopped` that `message_stop` did.
    """

    __slots__ = (
        "_created",
        "_id",
        "_model",
        "_no_arguments",
        "_role_sent",
        "_signature",
        "_started",
        "_thinking",
        "_tools",
        "_upstream_usage",
        "_usage_sent",
        "finished",
        "stopped",
        "usage",
    )

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.finished = False
        self.stopped = False
        self._id = ""
        self._model = ""
        self._created = int(time.time())
        self._role_sent = False
        self._usage_sent = False
        self._started = False
        self._tools: dict[int, int] = {}  # content block index -> OpenAI tool call index
        self._no_arguments: set[int] = set()  # tool blocks that streamed no argument yet
        self._thinking: list[str] | None = None  # the open thinking block's text pieces
        self._signature = ""
        self._upstream_usage = MessageUsage()

    def usage_so_far(self) -> Usage | None:
        """The final counts once reported; else the partial ones (see the class), None
        before `message_start`."""
        if self.usage is not None:
            return self.usage
        if not self._started:
            return None
        return _counts(self._upstream_usage, partial=True)

    def feed(self, data: bytes, out: _Sink) -> None:
        """Translate one event; ProviderError for an error event or a malformed one."""
        try:
            event = _decode_event(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ProviderError(f"upstream sent a malformed stream event: {exc}") from exc
        kind = event.type
        if kind == "content_block_delta":
            delta = event.delta
            if delta is None:
                return
            dtype = delta.type
            if dtype == "text_delta":
                self._emit(out, {"content": delta.text})
            elif dtype == "input_json_delta":
                tool = self._tools.get(event.index)
                if tool is not None and delta.partial_json:
                    self._no_arguments.discard(event.index)
                    call = {"index": tool, "function": {"arguments": delta.partial_json}}
                    self._emit(out, {"tool_calls": [call]})
            elif dtype == "thinking_delta":
                if self._thinking is not None:
                    self._thinking.append(delta.thinking)
                if delta.thinking:
                    self._emit(out, {"reasoning_content": delta.thinking})
            elif dtype == "signature_delta":
                self._signature += delta.signature
        elif kind == "content_block_stop":
            self._block_stop(event.index, out)
        elif kind == "content_block_start":
            self._block_start(event, out)
        elif kind == "message_start":
            if event.message is not None:
                self._started = True
                self._id = event.message.id
                self._model = event.message.model
                self._upstream_usage.update(event.message.usage)
        elif kind == "message_delta":
            if event.usage is not None:
                self._upstream_usage.update(event.usage)
            self.usage = openai_usage(self._upstream_usage)[1]
            if event.delta is not None and event.delta.stop_reason is not None:
                self.finished = True
                self._emit(out, {}, finish_reason(event.delta.stop_reason))
        elif kind == "message_stop":
            if not self.finished:  # no message_delta came: still close the choice
                self.finished = True
                self._emit(out, {}, "stop")
            self.stopped = True
            self.end(out)
        elif kind == "error":
            raise error_event(event.error)
        # ping and event types added later carry nothing to translate

    def end(self, out: _Sink) -> None:
        """At a complete end (`message_stop`, or EOF after a stop_reason): the usage chunk."""
        if self._usage_sent:
            return
        self._usage_sent = True
        usage_body, self.usage = openai_usage(self._upstream_usage)
        out.append(self._base([], usage_body))

    def _block_start(self, event: Event, out: _Sink) -> None:
        block = event.content_block
        if block is None:
            return
        kind = block.type
        if kind == "text":
            if block.text:
                self._emit(out, {"content": block.text})
        elif kind == "tool_use":
            tool = self._tools[event.index] = len(self._tools)
            arguments = _arguments(block.input) if block.input else ""
            if not arguments:
                self._no_arguments.add(event.index)
            function = {"name": block.name, "arguments": arguments}
            call = {"index": tool, "id": block.id, "type": "function", "function": function}
            self._emit(out, {"tool_calls": [call]})
        elif kind == "thinking":
            self._thinking = [block.thinking]
            self._signature = block.signature
            if block.thinking:
                self._emit(out, {"reasoning_content": block.thinking})
        elif kind == "redacted_thinking" and block.data:
            self._emit(out, {"thinking_blocks": [_redacted_block(block.data)]})

    def _block_stop(self, index: int, out: _Sink) -> None:
        """A thinking block goes out whole with its signature; a tool call that streamed no
        argument gets "{}", so its arguments are valid JSON once complete."""
        thinking = self._thinking
        if thinking is not None:
            self._thinking = None
            if self._signature:
                block = _thinking_block("".join(thinking), self._signature)
                self._emit(out, {"thinking_blocks": [block]})
            return
        if index in self._no_arguments:
            self._no_arguments.discard(index)
            call = {"index": self._tools[index], "function": {"arguments": "{}"}}
            self._emit(out, {"tool_calls": [call]})

    def _emit(self, out: _Sink, delta: dict[str, Any], finish: str | None = None) -> None:
        if not self._role_sent:
            self._role_sent = True
            out.append(self._base([_choice({"role": "assistant", "content": ""}, None)]))
        out.append(self._base([_choice(delta, finish)]))

    def _base(
        self, choices: list[dict[str, Any]], usage: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        chunk = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": choices,
        }
        if usage is not None:
            chunk["usage"] = usage
        return chunk


def _choice(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
