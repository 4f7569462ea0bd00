"""The chat-completions request as clients send it, decoded and checked once.

Fields default to UNSET so that what the client did not send is not sent upstream either.
The bounds that `gateway.chat.validation` checks (with its own messages) are stated here as
`extra_json_schema` for the OpenAPI document: JSON Schema only, the decoder ignores them.
Keywords of one JSON type (`minimum`, `maxItems`, ...) sit beside the generated `anyOf` of a
union and constrain only values of that type.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = [
    "FUNCTION_NAME_PATTERN",
    "MAX_METADATA_KEY",
    "MAX_METADATA_PAIRS",
    "MAX_METADATA_VALUE",
    "MAX_STOP",
    "MESSAGE_RULES",
    "PART_TYPES",
    "REASONING_EFFORTS",
    "REQUEST_RULES",
    "RESPONSE_FORMATS",
    "SERVICE_TIERS",
    "TOOL_CHOICES",
    "ChatMessage",
    "ChatRequest",
    "ChatRequestBody",
    "FunctionDefinition",
    "StreamOptions",
    "ToolDefinition",
]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]

PART_TYPES = ("text", "image_url", "input_audio", "file", "refusal")
TOOL_CHOICES = ("none", "auto", "required")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
SERVICE_TIERS = ("auto", "default", "flex", "scale", "priority")
FUNCTION_NAME_PATTERN = "^[A-Za-z0-9_-]{1,64}$"
MAX_STOP = 4
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512


def _doc(**schema: Any) -> Meta:
    return Meta(extra_json_schema=schema)


def _between(low: float, high: float | None = None) -> Meta:
    return _doc(minimum=low) if high is None else _doc(minimum=low, maximum=high)


def _refine(schema: dict[str, Any]) -> Meta:
    """Beside the generated schema (`allOf`), where its own keywords would be replaced."""
    return _doc(allOf=[schema])


_PART = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"enum": list(PART_TYPES)}},
    "if": {"properties": {"type": {"const": "text"}}},
    "then": {"required": ["text"], "properties": {"text": {"type": "string"}}},
}
_METADATA: dict[str, Any] = {
    "maxProperties": MAX_METADATA_PAIRS,
    "propertyNames": {"maxLength": MAX_METADATA_KEY},
    "additionalProperties": {"type": "string", "maxLength": MAX_METADATA_VALUE},
}
_NON_NULL = {"not": {"type": "null"}}


def _when(condition: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
    return {"if": condition, "then": then}


def _present(*names: str) -> dict[str, Any]:
    """Condition: each of `names` is there and not null (what the checks call "set")."""
    return {"required": list(names), "properties": dict.fromkeys(names, _NON_NULL)}


MESSAGE_RULES: dict[str, Any] = {
    "allOf": [
        _when(
            {"properties": {"role": {"enum": ["system", "developer", "user"]}}},
            _present("content"),
        ),
        _when(
            {"properties": {"role": {"const": "assistant"}}},
            {
                "anyOf": [
                    _present("content"),
                    {"required": ["tool_calls"]},
                    _present("function_call"),
                ]
            },
        ),
        _when({"properties": {"role": {"const": "tool"}}}, {"required": ["tool_call_id"]}),
        _when({"required": ["tool_calls"]}, {"properties": {"role": {"const": "assistant"}}}),
    ]
}
"""The rules of `gateway.chat.validation` that span a message's fields."""

REQUEST_RULES: dict[str, Any] = {
    "allOf": [
        {"not": {"required": ["functions", "tools"]}},
        {"not": {"required": ["function_call", "tool_choice"]}},
        _when(
            _present("top_logprobs"),
            {"required": ["logprobs"], "properties": {"logprobs": {"const": True}}},
        ),
        _when(
            _present("stream_options"),
            {"required": ["stream"], "properties": {"stream": {"const": True}}},
        ),
        _when(
            {"required": ["tool_choice"], "properties": {"tool_choice": {"const": "required"}}},
            {"required": ["tools"], "properties": {"tools": {"minItems": 1}}},
        ),
        _when(
            {"required": ["tool_choice"], "properties": {"tool_choice": {"type": "object"}}},
            {"required": ["tools"], "properties": {"tools": {"minItems": 1}}},
        ),
    ],
    "dependentRequired": {"parallel_tool_calls": ["tools"]},
    "description": "Extension fields (top-level fields beyond these, such as vLLM's `top_k`, "
    "`min_p` or `repetition_penalty`) go to OpenAI and OpenAI-compatible upstreams as sent, are "
    "translated where the model's upstream has them (`top_k`), and are otherwise a 400 naming "
    "them. Also refused (400): `max_tokens` and `max_completion_tokens` with different "
    "values; a `tool_choice` naming no tool of `tools` (a `function_call` no function of "
    "`functions`); a completion size above the model's output limit. The legacy `functions` "
    "and `function_call` are taken as `tools` and `tool_choice`, and answered as OpenAI "
    "answers them (`message.function_call`).",
}
"""The rules of `gateway.chat.validation` that span the request's fields (those JSON Schema
can say)."""

_TOOL_CHOICE_OBJECT = {
    "type": "object",
    "required": ["type", "function"],
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}},
        },
    },
}


_FUNCTION_CALL = {
    "anyOf": [
        {"enum": ["none", "auto"]},
        {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
    ]
}


class ChatMessage(msgspec.Struct, kw_only=True, omit_defaults=True):
    role: Role
    content: Annotated[
        str | list[dict[str, Any]] | UnsetType | None, _doc(minItems=1, items=_PART)
    ] = UNSET
    name: str | UnsetType = UNSET
    tool_calls: list[dict[str, Any]] | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET
    refusal: str | UnsetType | None = UNSET
    reasoning_content: str | UnsetType | None = UNSET
    thinking_blocks: list[dict[str, Any]] | UnsetType | None = UNSET
    """Signed thinking blocks of an earlier answer, sent back (docs/providers.md, Anthropic)."""
    reasoning_details: list[dict[str, Any]] | UnsetType | None = UNSET
    """OpenRouter's form of the same, accepted too."""
    extra_content: dict[str, Any] | UnsetType | None = UNSET
    """Provider extras of an earlier answer sent back (Gemini's `google.thought_signature`)."""
    audio: dict[str, Any] | UnsetType | None = UNSET
    function_call: dict[str, Any] | UnsetType | None = UNSET


class FunctionDefinition(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: Annotated[str, _doc(pattern=FUNCTION_NAME_PATTERN)]
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
    model: Annotated[str, _doc(minLength=1, examples=["auto"])]
    messages: Annotated[list[Annotated[ChatMessage, _doc(**MESSAGE_RULES)]], _doc(minItems=1)]
    temperature: Annotated[float | UnsetType | None, _between(0, 2)] = UNSET
    top_p: Annotated[float | UnsetType | None, _between(0, 1)] = UNSET
    max_tokens: Annotated[int | UnsetType | None, _between(1)] = UNSET
    max_completion_tokens: Annotated[int | UnsetType | None, _between(1)] = UNSET
    n: Annotated[int | UnsetType | None, _between(1, 128)] = UNSET
    seed: int | UnsetType | None = UNSET
    stop: Annotated[str | list[str] | UnsetType | None, _doc(maxItems=MAX_STOP)] = UNSET
    stream: bool | UnsetType | None = UNSET
    stream_options: StreamOptions | UnsetType | None = UNSET
    frequency_penalty: Annotated[float | UnsetType | None, _between(-2, 2)] = UNSET
    presence_penalty: Annotated[float | UnsetType | None, _between(-2, 2)] = UNSET
    logit_bias: Annotated[
        dict[str, float] | UnsetType | None,
        _doc(additionalProperties={"type": "number", "minimum": -100, "maximum": 100}),
    ] = UNSET
    logprobs: bool | UnsetType | None = UNSET
    top_logprobs: Annotated[int | UnsetType | None, _between(0, 20)] = UNSET
    tools: list[ToolDefinition] | UnsetType = UNSET
    tool_choice: Annotated[
        str | dict[str, Any] | UnsetType,
        _refine({"anyOf": [{"enum": list(TOOL_CHOICES)}, _TOOL_CHOICE_OBJECT]}),
    ] = UNSET
    parallel_tool_calls: bool | UnsetType = UNSET
    functions: Annotated[
        list[FunctionDefinition] | UnsetType, _doc(deprecated=True, minItems=1)
    ] = UNSET
    function_call: Annotated[
        str | dict[str, Any] | UnsetType, _refine(_FUNCTION_CALL), _doc(deprecated=True)
    ] = UNSET
    response_format: Annotated[
        dict[str, Any] | UnsetType,
        _doc(type="object", properties={"type": {"enum": list(RESPONSE_FORMATS)}}),
    ] = UNSET
    reasoning_effort: Annotated[str | UnsetType | None, _doc(enum=[*REASONING_EFFORTS, None])] = (
        UNSET
    )
    audio: dict[str, Any] | UnsetType | None = UNSET
    modalities: list[str] | UnsetType | None = UNSET
    metadata: Annotated[dict[str, str] | UnsetType | None, _doc(**_METADATA)] = UNSET
    store: bool | UnsetType | None = UNSET
    service_tier: Annotated[str | UnsetType | None, _doc(enum=[*SERVICE_TIERS, None])] = UNSET
    safety_identifier: str | UnsetType = UNSET
    prompt_cache_key: str | UnsetType = UNSET
    prompt_cache_retention: str | UnsetType | None = UNSET
    prompt_cache_options: dict[str, Any] | UnsetType = UNSET
    moderation: dict[str, Any] | UnsetType | None = UNSET
    user: str | UnsetType = UNSET
    prediction: dict[str, Any] | UnsetType | None = UNSET
    verbosity: str | UnsetType | None = UNSET
    web_search_options: dict[str, Any] | UnsetType = UNSET
    model_options: dict[str, Any] | UnsetType = UNSET


ChatRequestBody = Annotated[ChatRequest, Meta(extra_json_schema=REQUEST_RULES)]
"""The request with its cross-field rules, for the OpenAPI document."""
