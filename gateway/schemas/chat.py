"""The chat-completions request as clients send it, decoded and checked once.

Fields default to UNSET so that what the client did not send is not sent upstream either.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "ChatMessage",
    "ChatRequest",
    "FunctionDefinition",
    "StreamOptions",
    "ToolDefinition",
]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class ChatMessage(msgspec.Struct, kw_only=True, omit_defaults=True):
    role: Role
    content: str | list[dict[str, Any]] | UnsetType | None = UNSET
    name: str | UnsetType = UNSET
    tool_calls: list[dict[str, Any]] | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET
    refusal: str | UnsetType | None = UNSET
    reasoning_content: str | UnsetType | None = UNSET
    audio: dict[str, Any] | UnsetType | None = UNSET
    function_call: dict[str, Any] | UnsetType | None = UNSET


class FunctionDefinition(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    description: str | UnsetType = UNSET
    parameters: dict[str, Any] | UnsetType = UNSET
    strict: bool | UnsetType | None = UNSET


class ToolDefinition(msgspec.Struct, kw_only=True, omit_defaults=True):
    type: Literal["function"]
    function: FunctionDefinition


class StreamOptions(msgspec.Struct, kw_only=True, omit_defaults=True):
    include_usage: bool | UnsetType = UNSET
    include_obfuscation: bool | UnsetType = UNSET


class ChatRequest(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    model: str
    messages: list[ChatMessage]
    temperature: float | UnsetType | None = UNSET
    top_p: float | UnsetType | None = UNSET
    max_tokens: int | UnsetType | None = UNSET
    max_completion_tokens: int | UnsetType | None = UNSET
    n: int | UnsetType | None = UNSET
    seed: int | UnsetType | None = UNSET
    stop: str | list[str] | UnsetType | None = UNSET
    stream: bool | UnsetType | None = UNSET
    stream_options: StreamOptions | UnsetType | None = UNSET
    frequency_penalty: float | UnsetType | None = UNSET
    presence_penalty: float | UnsetType | None = UNSET
    logit_bias: dict[str, float] | UnsetType | None = UNSET
    logprobs: bool | UnsetType | None = UNSET
    top_logprobs: int | UnsetType | None = UNSET
    tools: list[ToolDefinition] | UnsetType = UNSET
    tool_choice: str | dict[str, Any] | UnsetType = UNSET
    parallel_tool_calls: bool | UnsetType = UNSET
    response_format: dict[str, Any] | UnsetType = UNSET
    reasoning_effort: str | UnsetType | None = UNSET
    audio: dict[str, Any] | UnsetType | None = UNSET
    modalities: list[str] | UnsetType | None = UNSET
    metadata: dict[str, str] | UnsetType | None = UNSET
    store: bool | UnsetType | None = UNSET
    service_tier: str | UnsetType | None = UNSET
    safety_identifier: str | UnsetType = UNSET
    prompt_cache_key: str | UnsetType = UNSET
    user: str | UnsetType = UNSET
    prediction: dict[str, Any] | UnsetType | None = UNSET
    verbosity: str | UnsetType | None = UNSET
    web_search_options: dict[str, Any] | UnsetType = UNSET
    model_options: dict[str, Any] | UnsetType = UNSET
