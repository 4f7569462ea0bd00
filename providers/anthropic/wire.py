"""Anthropic's answer shapes, decoded once where the bytes come in.

Every field has a default and unknown fields are ignored, so a new block, delta or event type
decodes (and is skipped by the translator) instead of failing the call; a field of the wrong
type is still a decode error. One `Event` struct covers every stream event: a union tagged on
`type` would reject event types added after this code was written.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Block", "Delta", "ErrorObject", "Event", "Message", "MessageUsage"]


class MessageUsage(msgspec.Struct, kw_only=True):
    """Token counts; None when this event did not report the field (stream deltas)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None

    def update(self, other: MessageUsage) -> None:
        """Take the fields `other` reported (`message_delta` counts are cumulative)."""
        if other.input_tokens is not None:
            self.input_tokens = other.input_tokens
        if other.output_tokens is not None:
            self.output_tokens = other.output_tokens
        if other.cache_creation_input_tokens is not None:
            self.cache_creation_input_tokens = other.cache_creation_input_tokens
        if other.cache_read_input_tokens is not None:
            self.cache_read_input_tokens = other.cache_read_input_tokens


class Block(msgspec.Struct, kw_only=True):
    """A content block: text, tool_use, thinking with its `signature`, redacted_thinking with
    its encrypted `data` (others are decoded and skipped)."""

    type: str
    text: str = ""
    id: str = ""
    name: str = ""
    input: Any = None
    thinking: str = ""
    signature: str = ""
    data: str = ""


class ErrorObject(msgspec.Struct, kw_only=True):
    type: str = ""
    message: str = ""


class Message(msgspec.Struct, kw_only=True):
    """A whole answer (`type: "message"`), or an error object sent with a 2xx status."""

    type: str = "message"
    id: str = ""
    model: str = ""
    content: list[Block] = []
    stop_reason: str | None = None
    usage: MessageUsage = msgspec.field(default_factory=MessageUsage)
    error: ErrorObject | None = None


class Delta(msgspec.Struct, kw_only=True):
    """`content_block_delta` (text/input_json/thinking/signature) or `message_delta`
    (stop_reason)."""

    type: str = ""
    text: str = ""
    partial_json: str = ""
    thinking: str = ""
    signature: str = ""
    stop_reason: str | None = None


class Event(msgspec.Struct, kw_only=True):
    type: str
    index: int = 0
    message: Message | None = None
    content_block: Block | None = None
    delta: Delta | None = None
    usage: MessageUsage | None = None
    error: ErrorObject | None = None
