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
    content: str | list[dict[str, Any]] | None | UnsetType = UNSET
    name: str | UnsetType = UNSET
    tool_calls: list[dict[str, Any]] | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET
    refusal: str | None | UnsetType = UNSET
    reasoning_content: str | None | UnsetType = UNSET
    audio: dict[str, Any] | None | UnsetType = UNSET
    function_call: dict[str, Any] | None | UnsetType = UNSET


class FunctionDefinition(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    description: str | UnsetType = UNSET
    parameters: dict[str, Any] | UnsetType = UNSET
    strict: bool | None | UnsetType = UNSET


class ToolDefinition(msgspec.Struct, kw_only=True, omit_defaults=True):
    type: Literal["function"]
    function: FunctionDefinition


class StreamOptions(msgspec.Struct, kw_only=True, omit_defaults=True):
    include_usage: bool | UnsetType = UNSET
    include_obfuscation: bool | UnsetType = UNSET


class ChatRequest(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    model: str
    messages: list[ChatMessage]
    temperature: float | None | UnsetType = UNSET
    top_p: float | None | UnsetType = UNSET
    max_tokens: int | None | UnsetType = UNSET
    max_completion_tokens: int | None | UnsetType = UNSET
    n: int | None | UnsetType = UNSET
    seed: int | None | UnsetType = UNSET
    stop: str | list[str] | None | UnsetType = UNSET
    stream: bool | None | UnsetType = UNSET
    stream_options: StreamOptions | None | UnsetType = UNSET
    frequency_penalty: float | None | UnsetType = UNSET
    presence_penalty: float | None | UnsetType = UNSET
    logit_bias: dict[str, float] | None | UnsetType = UNSET
    logprobs: bool | None | UnsetType = UNSET
    top_logprobs: int | None | UnsetType = UNSET
    tools: list[ToolDefinition] | UnsetType = UNSET
    tool_choice: str | dict[str, Any] | UnsetType = UNSET
    parallel_tool_calls: bool | UnsetType = UNSET
    response_format: dict[str, Any] | UnsetType = UNSET
    reasoning_effort: str | None | UnsetType = UNSET
    audio: dict[str, Any] | None | UnsetType = UNSET
    modalities: list[str] | None | UnsetType = UNSET
    metadata: dict[str, str] | None | UnsetType = UNSET
    store: bool | None | UnsetType = UNSET
    service_tier: str | None | UnsetType = UNSET
    safety_identifier: str | UnsetType = UNSET
    prompt_cache_key: str | UnsetType = UNSET
    user: str | UnsetType = UNSET
    prediction: dict[str, Any] | None | UnsetType = UNSET
    verbosity: str | None | UnsetType = UNSET
    web_search_options: dict[str, Any] | UnsetType = UNSET
    model_options: dict[str, Any] | UnsetType = UNSET
