"""Counting an answer whose server reported no usage (many local servers, in streams).

The gateway charges from `usage`, so an answer without it is counted here, at about four
characters a token (the usual ratio of byte-level tokenizers on English text), and the
usage says so: `estimated: true`, which the client sees beside the counts and the credits.

    prompt      3 + per message (4 + its text / 4, 85 per image or other non-text part,
                its tool calls' JSON / 4) + the tools' JSON / 4
    completion  (content + reasoning + tool-call names and arguments) / 4, at least one
                token per chunk that carried output
"""

from __future__ import annotations

from typing import Any

import msgspec

from providers.base import Usage

__all__ = ["OutputCounter", "estimated_usage", "prompt_tokens", "usage_body"]

_CHARS_PER_TOKEN = 4
_PER_MESSAGE = 4
_PER_REQUEST = 3
_PER_NON_TEXT_PART = 85
_encode = msgspec.json.encode


def _tokens(chars: int) -> int:
    return -(-chars // _CHARS_PER_TOKEN)


def prompt_tokens(body: dict[str, Any]) -> int:
    """The estimated prompt tokens of an OpenAI chat body."""
    total = _PER_REQUEST
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        total += _PER_MESSAGE
        content = message.get("content")
        if isinstance(content, str):
            total += _tokens(len(content))
        elif isinstance(content, list):
            for part in content:
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str):
                    total += _tokens(len(text))
                else:
                    total += _PER_NON_TEXT_PART
        calls = message.get("tool_calls")
        if calls:
            total += _tokens(len(_encode(calls)))
    tools = body.get("tools")
    if tools:
        total += _tokens(len(_encode(tools)))
    return total


class OutputCounter:
    """Characters of output seen in chunks (or a whole message), and the chunks that had any."""

    __slots__ = ("chars", "chunks")

    def __init__(self) -> None:
        self.chars = 0
        self.chunks = 0

    def add_delta(self, delta: object) -> None:
        if not isinstance(delta, dict):
            return
        chars = _output_chars(delta)
        if chars:
            self.chars += chars
            self.chunks += 1

    def tokens(self) -> int:
        return max(_tokens(self.chars), self.chunks)


def _output_chars(part: dict[str, Any]) -> int:
    """Characters of output in a delta or a message: text, reasoning, tool calls."""
    chars = 0
    for name in ("content", "reasoning_content", "reasoning", "refusal"):
        value = part.get(name)
        if isinstance(value, str):
            chars += len(value)
    for call in part.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            for name in ("name", "arguments"):
                value = function.get(name)
                if isinstance(value, str):
                    chars += len(value)
    return chars


def estimated_usage(body: dict[str, Any], completion: dict[str, Any]) -> Usage:
    """The usage of a whole answer (`chat.completion`) to `body`, estimated."""
    output = 0
    for choice in completion.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict):
            output += _tokens(_output_chars(message))
    prompt = prompt_tokens(body)
    return Usage(prompt_tokens=prompt, completion_tokens=output, total_tokens=prompt + output)


def usage_body(usage: Usage) -> dict[str, Any]:
    """The `usage` object of an estimated count, as the client sees it."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "estimated": True,
    }
