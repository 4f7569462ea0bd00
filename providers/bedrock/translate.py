"""Bedrock Converse answers -> the gateway's OpenAI shapes: a whole `chat.completion`, or
chunks from the stream's events.

    text blocks              content, joined (null when there is none)
    reasoningContent         reasoning_content (its text), and every signed block, in order,
                             in `thinking_blocks` ({type: thinking, thinking, signature},
                             {type: redacted_thinking, data}), the shape the Anthropic adapter
                             uses, so a client sends it back on the next turn as it does there
    toolUse blocks           tool_calls (`toolUseId` is the id; `input` a JSON string)
    stopReason               end_turn, stop_sequence -> stop; tool_use -> tool_calls;
                             max_tokens, model_context_window_exceeded -> length;
                             guardrail_intervened, content_filtered -> content_filter;
                             anything else -> stop
    usage                    prompt = input + cache read + cache write tokens (Bedrock counts
                             them apart), completion = output tokens; the cache counts in
                             prompt_tokens_details (`cached_tokens`, `cache_creation_tokens`)

Converse gives no id: the completion's is `chatcmpl-<random>` (the gateway puts its own), and
`model` is the upstream model asked for.
"""

from __future__ import annotations

import os
import time
from typing import Any

import msgspec

from providers.base import ChatCompletion, Usage
from providers.bedrock.wire import (
    BlockDelta,
    BlockStart,
    ContentBlock,
    TokenUsage,
    decode_block_delta,
    decode_block_start,
    decode_message_stop,
    decode_metadata,
    decode_response,
)
from providers.errors import ProviderError

__all__ = ["StreamTranslator", "completion_from_bytes", "usage_of"]

_encode = msgspec.json.encode
_NO_USAGE = Usage()
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}


def usage_of(usage: TokenUsage) -> Usage:
    read, written = usage.cache_read_input_tokens, usage.cache_write_input_tokens
    prompt = usage.input_tokens + read + written
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=usage.output_tokens,
        total_tokens=prompt + usage.output_tokens,
        cached_tokens=read,
        cache_creation_tokens=written,
    )


def _usage_body(usage: TokenUsage) -> dict[str, Any]:
    counted = usage_of(usage)
    return {
        "prompt_tokens": counted.prompt_tokens,
        "completion_tokens": counted.completion_tokens,
        "total_tokens": counted.total_tokens,
        "prompt_tokens_details": {
            "cached_tokens": counted.cached_tokens,
            "cache_creation_tokens": counted.cache_creation_tokens,
        },
    }


def completion_from_bytes(raw: bytes, model: str) -> ChatCompletion:
    """A `chat.completion` for a `Converse` answer asked of `model`."""
    try:
        response = decode_response(raw)
    except msgspec.ValidationError as exc:
        raise ProviderError(f"the upstream's answer is not a Converse answer: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise ProviderError(f"the upstream sent a malformed answer: {exc}") from exc
    message = response.output.message if response.output is not None else None
    if message is None:
        raise ProviderError("the upstream answered without a message")
    out, calls = _message(message.content)
    finish = _FINISH.get(response.stop_reason or "end_turn", "stop")
    if calls and finish == "stop":
        finish = "tool_calls"
    body: dict[str, Any] = {
        "id": "chatcmpl-" + os.urandom(12).hex(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": out, "logprobs": None, "finish_reason": finish}],
    }
    if response.usage is None:
        return ChatCompletion(body=body, usage=_NO_USAGE)
    body["usage"] = _usage_body(response.usage)
    return ChatCompletion(body=body, usage=usage_of(response.usage))


def _message(blocks: list[ContentBlock]) -> tuple[dict[str, Any], bool]:
    texts: list[str] = []
    reasoning: list[str] = []
    signed: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        if block.text is not None:
            texts.append(block.text)
        elif block.tool_use is not None:
            use = block.tool_use
            arguments = _encode(use.input if use.input is not None else {}).decode()
            calls.append(
                {
                    "id": use.tool_use_id,
                    "type": "function",
                    "function": {"name": use.name, "arguments": arguments},
                }
            )
        elif block.reasoning_content is not None:
            content = block.reasoning_content
            text = content.reasoning_text
            if text is not None:
                reasoning.append(text.text)
                if text.signature:
                    signed.append(_thinking(text.text, text.signature))
            elif content.redacted_content:
                signed.append(_redacted(content.redacted_content))
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": None,
    }
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if signed:
        message["thinking_blocks"] = signed
    if calls:
        message["tool_calls"] = calls
    return message, bool(calls)


def _thinking(text: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": signature}


def _redacted(data: str) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


class _Block:
    """What a stream keeps of one content block until it stops."""

    __slots__ = ("arguments", "kind", "reasoning", "signature", "tool")

    def __init__(self, kind: str, tool: int = -1) -> None:
        self.kind = kind  # "text", "tool" or "reasoning"
        self.tool = tool  # its tool_calls index
        self.arguments = False  # a tool's input fragment went out
        self.reasoning: list[str] = []
        self.signature: str | None = None


class StreamTranslator:
    """Per-stream state: each event (its type and payload) -> OpenAI chunks.

    The role goes out with the first content, so an exception event right after
    `messageStart` still fails before anything was handed out. A tool call opens with its
    id, name and empty arguments, its input fragments follow; one that streamed none gets
    "{}" when its block stops. A reasoning block's text streams as `reasoning_content`, and
    when it stops, one delta carries it whole with its signature (`thinking_blocks`).
    `messageStop` gives the finish chunk (`finished`), `metadata` the usage chunk.
    """

    __slots__ = ("_base", "_blocks", "_delivered", "_role", "_tools", "finished", "usage")

    def __init__(self, model: str) -> None:
        self._base = {
            "id": "chatcmpl-" + os.urandom(12).hex(),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        self._blocks: dict[int, _Block] = {}
        self._tools = 0
        self._role = False
        self._delivered = 0
        self.finished = False
        self.usage: Usage | None = None

    def chunks(self, event: str, payload: bytes) -> list[dict[str, Any]]:
        """The chunks for one event (none for `messageStart` and unknown events)."""
        try:
            if event == "contentBlockDelta":
                return self._delta(decode_block_delta(payload))
            if event == "contentBlockStart":
                return self._start(decode_block_start(payload))
            if event == "contentBlockStop":
                return self._stop(decode_block_delta(payload).content_block_index)
            if event == "messageStop":
                reason = decode_message_stop(payload).stop_reason
                finish = _FINISH.get(reason or "end_turn", "stop")
                if self._tools and finish == "stop":
                    finish = "tool_calls"
                self.finished = True
                return [self._chunk({}, finish)]
            if event == "metadata":
                usage = decode_metadata(payload).usage
                if usage is None:
                    return []
                self.usage = usage_of(usage)
                return [{**self._base, "choices": [], "usage": _usage_body(usage)}]
        except msgspec.ValidationError as exc:
            raise ProviderError(f"the upstream sent a malformed {event} event: {exc}") from exc
        except msgspec.DecodeError as exc:
            raise ProviderError(f"the upstream sent a malformed {event} event: {exc}") from exc
        return []

    @property
    def delivered(self) -> int:
        """Characters of output handed out so far (text, reasoning, tool arguments)."""
        return self._delivered

    def _start(self, event: BlockStart) -> list[dict[str, Any]]:
        use = event.start.tool_use if event.start is not None else None
        if use is None:
            return []
        index = self._tools
        self._tools += 1
        self._blocks[event.content_block_index] = _Block("tool", index)
        call = {
            "index": index,
            "id": use.tool_use_id,
            "type": "function",
            "function": {"name": use.name, "arguments": ""},
        }
        return [self._chunk({"content": None, "tool_calls": [call]})]

    def _delta(self, event: BlockDelta) -> list[dict[str, Any]]:
        delta = event.delta
        if delta is None:
            return []
        at = event.content_block_index
        if delta.text is not None:
            self._blocks.setdefault(at, _Block("text"))
            if not delta.text and self._role:
                return []
            self._delivered += len(delta.text)
            return [self._chunk({"content": delta.text})]
        if delta.tool_use is not None:
            block = self._blocks.get(at)
            if block is None or block.kind != "tool":
                raise ProviderError("the upstream sent tool input for a block that is no tool")
            fragment = delta.tool_use.input
            if not fragment:
                return []
            block.arguments = True
            self._delivered += len(fragment)
            call = {"index": block.tool, "function": {"arguments": fragment}}
            return [self._chunk({"tool_calls": [call]})]
        reasoning = delta.reasoning_content
        if reasoning is None:
            return []
        block = self._blocks.setdefault(at, _Block("reasoning"))
        if reasoning.signature is not None:
            block.signature = reasoning.signature
        if reasoning.redacted_content:
            return [self._chunk({"thinking_blocks": [_redacted(reasoning.redacted_content)]})]
        if reasoning.text:
            block.reasoning.append(reasoning.text)
            self._delivered += len(reasoning.text)
            return [self._chunk({"reasoning_content": reasoning.text})]
        return []

    def _stop(self, at: int) -> list[dict[str, Any]]:
        block = self._blocks.get(at)
        if block is None:
            return []
        if block.kind == "tool" and not block.arguments:
            block.arguments = True
            call = {"index": block.tool, "function": {"arguments": "{}"}}
            return [self._chunk({"tool_calls": [call]})]
        if block.kind == "reasoning" and block.signature:
            signed = _thinking("".join(block.reasoning), block.signature)
            return [self._chunk({"thinking_blocks": [signed]})]
        return []

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        if not self._role:
            self._role = True
            delta = {"role": "assistant", **delta}
            if "content" not in delta:
                delta["content"] = "" if "tool_calls" not in delta else None
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**self._base, "choices": [choice]}
