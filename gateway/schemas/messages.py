"""Anthropic's Messages API request as clients send it (`POST /v1/messages`, and its
`count_tokens`), typed where the gateway reads it.

Only what the gateway must understand is typed and checked (the model, the limits, `stream`,
what it prices and routes on, and the shape the translation reads); content blocks, tools, the
thinking config and a message's `role` stay plain values, read by the translation
(`gateway.http.anthropic.request`) and passed as they came to Anthropic upstreams. Fields not
declared here are allowed: Anthropic upstreams get them (the API grows faster than this file),
and a request to another upstream drops the ones that only tune Anthropic's behaviour
(`TUNING_FIELDS`, named in `x-gateway-dropped-fields`) and is refused naming any other. Fields
default to UNSET so that what the client did not send is not sent on either; a top-level
`null` reads as not sent (Claude Code sends `speed: null`), and is passed on as it came.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = [
    "TOP_LEVEL_FIELDS",
    "TUNING_FIELDS",
    "CountTokensRequest",
    "MessageParam",
    "MessagesRequest",
]


class MessageParam(msgspec.Struct, kw_only=True, omit_defaults=True):
    role: str
    """`user`, `assistant` or `system` (mid-conversation instructions) today; another role
    goes to Anthropic upstreams as sent, and is refused naming it by the translation."""
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
    output_format: dict[str, Any] | UnsetType = UNSET
    """The beta form of `output_config.format`."""


TOP_LEVEL_FIELDS = frozenset(MessagesRequest.__struct_fields__)
"""The fields the gateway knows; others go to Anthropic upstreams only."""

TUNING_FIELDS = (
    "cache_control",
    "context_management",
    "diagnostics",
    "fallback_credit_token",
    "service_tier",
    "top_k",
    "user_profile_id",
)
"""Fields that only tune how Anthropic serves the call (prompt caching and its diagnostics,
context editing, the capacity tier, sampling breadth, billing and attribution of Anthropic's
own): other upstreams are sent the call without them, and the answer names them
(`x-gateway-dropped-fields`). `context_management` is sent by Claude Code by default."""
