"""Anthropic's Messages API request as clients send it (`POST /v1/messages`, and its
`count_tokens`), typed where the gateway reads it.

The top level is typed and checked once; content blocks, tools and the thinking config stay
plain objects, read by the translation (`gateway.http.anthropic_request`) and passed as they
came to Anthropic upstreams. Fields not declared here are allowed: Anthropic upstreams get them
(the API grows faster than this file), and a request to another upstream is refused naming
them. Fields default to UNSET so that what the client did not send is not sent on either.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = [
    "TOP_LEVEL_FIELDS",
    "CountTokensRequest",
    "MessageParam",
    "MessagesRequest",
]


class MessageParam(msgspec.Struct, kw_only=True, omit_defaults=True):
    role: Literal["user", "assistant"]
    content: str | list[dict[str, Any]]


class CountTokensRequest(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What `count_tokens` reads: the prompt's parts (no output settings)."""

    model: Annotated[str, Meta(min_length=1, examples=["auto"])]
    messages: Annotated[list[MessageParam], Meta(min_length=1)]
    system: str | list[dict[str, Any]] | UnsetType = UNSET
    tools: list[dict[str, Any]] | UnsetType = UNSET
    tool_choice: dict[str, Any] | UnsetType = UNSET
    thinking: dict[str, Any] | UnsetType = UNSET


class MessagesRequest(CountTokensRequest, kw_only=True, omit_defaults=True):
    max_tokens: Annotated[int, Meta(ge=0)]
    """0 warms the prompt cache without an answer (Anthropic upstreams only)."""
    metadata: dict[str, Any] | UnsetType = UNSET
    stop_sequences: list[str] | UnsetType = UNSET
    stream: bool | UnsetType = UNSET
    temperature: Annotated[float, Meta(ge=0, le=1)] | UnsetType = UNSET
    top_p: Annotated[float, Meta(ge=0, le=1)] | UnsetType = UNSET
    top_k: Annotated[int, Meta(ge=0)] | UnsetType = UNSET
    service_tier: str | UnsetType = UNSET
    output_config: dict[str, Any] | UnsetType = UNSET
    cache_control: dict[str, Any] | UnsetType = UNSET
    speed: str | UnsetType = UNSET
    inference_geo: str | UnsetType | None = UNSET


TOP_LEVEL_FIELDS = frozenset(MessagesRequest.__struct_fields__)
"""The fields the gateway knows; others go to Anthropic upstreams only."""
