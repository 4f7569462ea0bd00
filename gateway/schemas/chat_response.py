"""The chat-completions answer as clients receive it, for the OpenAPI document.

The gateway passes an upstream's fields through (translated to OpenAI's shape) and sets `id`,
`model`, `object` and the credit fields of `usage`, so these objects are open: the fields the
contract names are typed, others may appear.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "ChatChoice",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatDelta",
    "ChatResponseMessage",
    "ChatUsage",
    "ChunkChoice",
    "FunctionCall",
    "ToolCall",
]


class FunctionCall(msgspec.Struct, kw_only=True):
    name: str
    arguments: str


class ToolCall(msgspec.Struct, kw_only=True):
    id: str
    type: Literal["function"]
    function: FunctionCall


class ChatResponseMessage(msgspec.Struct, kw_only=True):
    role: Literal["assistant"]
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    audio: dict[str, Any] | None = None
    name: str | None = None


class ChatChoice(msgspec.Struct, kw_only=True):
    index: int
    message: ChatResponseMessage
    finish_reason: str | None
    logprobs: dict[str, Any] | None = None


class ChatUsage(msgspec.Struct, kw_only=True):
    """Tokens as the upstream reported them (estimated when it did not), and the charge:
    `credits` (four decimals) and its USD display value at the wallet's rate."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    credits: str
    credits_usd_reference: str
    prompt_tokens_details: dict[str, Any] | None = None
    completion_tokens_details: dict[str, Any] | None = None
    estimated: bool | None = None
    """True when the upstream gave no usable counts (absent, zero, malformed, a stream cut
    short) and the gateway counted them itself (docs/api.md, "Money"); absent when the counts
    are the upstream's."""


class ChatCompletion(msgspec.Struct, kw_only=True):
    """A whole answer (`stream` false or absent); charged before it is sent."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    """The model that answered (also in the `x-gateway-model` header)."""
    choices: list[ChatChoice]
    usage: ChatUsage
    system_fingerprint: str | None = None
    service_tier: str | None = None


class ChatDelta(msgspec.Struct, kw_only=True):
    role: Literal["assistant"] | None = None
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class ChunkChoice(msgspec.Struct, kw_only=True):
    index: int
    delta: ChatDelta
    finish_reason: str | None = None
    logprobs: dict[str, Any] | None = None


class ChatCompletionChunk(msgspec.Struct, kw_only=True):
    """One `data:` event of a stream. The first delta carries the role, later ones content;
    the last has a `finish_reason`. With `stream_options.include_usage` a final chunk has no
    choices and the `usage` (with the charge). Then `data: [DONE]`. A stream that breaks after
    it started ends with one `data:` event holding the error envelope and no `[DONE]`."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: ChatUsage | None = None
    system_fingerprint: str | None = None
