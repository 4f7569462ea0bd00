"""Bedrock Converse on the wire: the answer of `Converse` and the events of `ConverseStream`,
decoded once into typed Structs (unknown fields, such as `metrics`, `trace` or the `p`
padding AWS adds to stream events, are skipped by msgspec and cost nothing).

Requests are built as plain dicts (`providers.bedrock.request`). A stream event's payload is
the member of `ConverseStreamOutput` its `:event-type` header names (`contentBlockDelta`...),
without the wrapper object.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "BlockDelta",
    "BlockStart",
    "ContentBlock",
    "ConverseResponse",
    "Delta",
    "MessageStop",
    "Metadata",
    "ReasoningContent",
    "ReasoningDelta",
    "ReasoningText",
    "TokenUsage",
    "ToolUse",
    "ToolUseDelta",
    "ToolUseStart",
    "decode_block_delta",
    "decode_block_start",
    "decode_message_stop",
    "decode_metadata",
    "decode_response",
]


class ToolUse(msgspec.Struct, kw_only=True, rename="camel"):
    tool_use_id: str
    name: str
    input: Any = None


class ReasoningText(msgspec.Struct, kw_only=True):
    text: str = ""
    signature: str | None = None


class ReasoningContent(msgspec.Struct, kw_only=True, rename="camel"):
    reasoning_text: ReasoningText | None = None
    redacted_content: str | None = None  # a blob: base64 in JSON


class ContentBlock(msgspec.Struct, kw_only=True, rename="camel"):
    """One block of the answer; only text, tool use and reasoning are read (images,
    documents, citations and guard content are not part of the chat shape)."""

    text: str | None = None
    tool_use: ToolUse | None = None
    reasoning_content: ReasoningContent | None = None


class Message(msgspec.Struct, kw_only=True):
    role: str = "assistant"
    content: list[ContentBlock] = []


class Output(msgspec.Struct, kw_only=True):
    message: Message | None = None


class TokenUsage(msgspec.Struct, kw_only=True, rename="camel"):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_write_input_tokens: int = 0


class ConverseResponse(msgspec.Struct, kw_only=True, rename="camel"):
    output: Output | None = None
    stop_reason: str | None = None
    usage: TokenUsage | None = None


class ToolUseStart(msgspec.Struct, kw_only=True, rename="camel"):
    tool_use_id: str = ""
    name: str = ""


class Start(msgspec.Struct, kw_only=True, rename="camel"):
    tool_use: ToolUseStart | None = None


class BlockStart(msgspec.Struct, kw_only=True, rename="camel"):
    content_block_index: int = 0
    start: Start | None = None


class ToolUseDelta(msgspec.Struct, kw_only=True):
    input: str = ""


class ReasoningDelta(msgspec.Struct, kw_only=True, rename="camel"):
    text: str | None = None
    signature: str | None = None
    redacted_content: str | None = None


class Delta(msgspec.Struct, kw_only=True, rename="camel"):
    text: str | None = None
    tool_use: ToolUseDelta | None = None
    reasoning_content: ReasoningDelta | None = None


class BlockDelta(msgspec.Struct, kw_only=True, rename="camel"):
    content_block_index: int = 0
    delta: Delta | None = None


class MessageStop(msgspec.Struct, kw_only=True, rename="camel"):
    stop_reason: str | None = None


class Metadata(msgspec.Struct, kw_only=True):
    usage: TokenUsage | None = None


decode_response = msgspec.json.Decoder(ConverseResponse).decode
decode_block_start = msgspec.json.Decoder(BlockStart).decode
decode_block_delta = msgspec.json.Decoder(BlockDelta).decode
decode_message_stop = msgspec.json.Decoder(MessageStop).decode
decode_metadata = msgspec.json.Decoder(Metadata).decode
