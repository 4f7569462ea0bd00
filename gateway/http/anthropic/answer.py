"""Answers as Anthropic's Messages API gives them: a chat.completion translated into a
message, and a native message finished with the gateway's credits.

    message.content            a text block
    message.tool_calls         tool_use blocks (arguments decoded; not JSON: {})
    thinking_blocks            thinking / redacted_thinking blocks, signed, first
    reasoning_content          without signed blocks: one thinking block, signature ""
    finish_reason              stop -> end_turn, length -> max_tokens, tool_calls and
                               function_call -> tool_use, content_filter -> refusal
    usage                      input_tokens = prompt - cache reads - cache writes,
                               output_tokens, cache_read_input_tokens,
                               cache_creation_input_tokens; credits, credits_usd_reference
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["anthropic_usage", "finished_message", "message_of", "stop_reason"]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.decode
_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def stop_reason(finish_reason: object) -> str:
    return _STOP_REASONS.get(finish_reason if isinstance(finish_reason, str) else "", "end_turn")


def anthropic_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI usage object (with the gateway's credits) in Anthropic's names."""
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    cached = _count(details.get("cached_tokens"))
    written = _count(details.get("cache_creation_tokens"))
    out: dict[str, Any] = {
        "input_tokens": max(_count(usage.get("prompt_tokens")) - cached - written, 0),
        "output_tokens": _count(usage.get("completion_tokens")),
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": cached,
    }
    for name in ("credits", "credits_usd_reference"):
        if name in usage:
            out[name] = usage[name]
    return out


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def message_of(completion: dict[str, Any]) -> bytes:
    """A finished chat.completion (one choice) as a Messages API message."""
    choices = completion.get("choices") or [{}]
    choice = choices[0]
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = list(thinking_of(message))
    text = message.get("content")
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name"),
                "input": _arguments(function.get("arguments")),
            }
        )
    body = {
        "id": completion.get("id"),
        "type": "message",
        "role": "assistant",
        "model": completion.get("model"),
        "content": content,
        "stop_reason": stop_reason(choice.get("finish_reason")),
        "stop_sequence": None,
        "usage": anthropic_usage(completion.get("usage") or {}),
    }
    return _encode(body)


def thinking_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The thinking blocks of an OpenAI-shaped message (or delta): its signed ones, else its
    readable reasoning as one unsigned block."""
    signed = message.get("thinking_blocks")
    if isinstance(signed, list) and signed:
        return [block for block in signed if isinstance(block, dict)]
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        return [{"type": "thinking", "thinking": reasoning, "signature": ""}]
    return []


def _arguments(raw: object) -> Any:
    if isinstance(raw, str) and raw:
        try:
            value = _decode(raw)
        except msgspec.DecodeError:
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def finished_message(body: dict[str, Any], credits: dict[str, str]) -> bytes:
    """A native message (the gateway's id and model in it) with the credits in its usage."""
    usage = body.get("usage")
    if isinstance(usage, dict):
        usage.update(credits)
    else:
        body["usage"] = dict(credits)
    return _encode(body)
