"""OpenAI's Responses API request as clients send it (`POST /v1/responses` and
`/v1/responses/input_tokens`), typed where the gateway reads it.

The top level is typed and checked once; input items, content parts, tools and `tool_choice`
stay plain objects, read by the translation (`gateway.http.openai_responses.request`). Fields
not declared here are allowed and ignored (the API grows faster than this file); fields default
to UNSET so that what the client did not send is not sent on.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = ["InputTokensRequest", "ReasoningConfig", "ResponsesRequest", "TextConfig"]


class ReasoningConfig(msgspec.Struct, kw_only=True, omit_defaults=True):
    effort: str | UnsetType | None = UNSET
    summary: str | UnsetType | None = UNSET
    generate_summary: str | UnsetType | None = UNSET


class TextConfig(msgspec.Struct, kw_only=True, omit_defaults=True):
    format: dict[str, Any] | UnsetType | None = UNSET
    verbosity: str | UnsetType | None = UNSET


class InputTokensRequest(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What `input_tokens` reads: the prompt's parts (no output settings)."""

    model: Annotated[str, Meta(min_length=1, examples=["auto"])]
    input: str | list[Any] | UnsetType = UNSET
    instructions: str | UnsetType | None = UNSET
    tools: list[dict[str, Any]] | UnsetType | None = UNSET
    tool_choice: str | dict[str, Any] | UnsetType | None = UNSET
    previous_response_id: str | UnsetType | None = UNSET
    reasoning: ReasoningConfig | UnsetType | None = UNSET
    text: TextConfig | UnsetType | None = UNSET
    parallel_tool_calls: bool | UnsetType | None = UNSET
    conversation: Any = UNSET


class ResponsesRequest(InputTokensRequest, kw_only=True, omit_defaults=True):
    stream: bool | UnsetType | None = UNSET
    max_output_tokens: Annotated[int, Meta(ge=1)] | UnsetType | None = UNSET
    temperature: Annotated[float, Meta(ge=0, le=2)] | UnsetType | None = UNSET
    top_p: Annotated[float, Meta(ge=0, le=1)] | UnsetType | None = UNSET
    metadata: dict[str, str] | UnsetType | None = UNSET
    user: str | UnsetType | None = UNSET
    store: bool | UnsetType | None = UNSET
    background: bool | UnsetType | None = UNSET
    prompt: dict[str, Any] | UnsetType | None = UNSET
    include: list[str] | UnsetType | None = UNSET
    truncation: str | UnsetType | None = UNSET
    safety_identifier: str | UnsetType | None = UNSET
    prompt_cache_key: str | UnsetType | None = UNSET
    service_tier: str | UnsetType | None = UNSET
    max_tool_calls: int | UnsetType | None = UNSET
    top_logprobs: int | UnsetType | None = UNSET
