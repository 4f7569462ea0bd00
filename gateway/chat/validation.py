"""Chat request checks beyond types: the rules of the spec's request table and OpenAI's.

Every problem becomes a `{field, message}` detail of one 400 `invalid_request`, naming the
field as the client sent it. What OpenAI accepts is accepted (`temperature` with `top_p`; the
legacy `functions` and `function_call`, which leave here as `tools` and `tool_choice`).
"""

from __future__ import annotations

import re
from typing import Any

from msgspec import UNSET

from gateway.chat.legacy_functions import legacy_problems, legacy_to_tools
from gateway.errors import ErrorDetail, InvalidRequest, fields_message
from gateway.schemas.chat import (
    FUNCTION_NAME_PATTERN,
    MAX_METADATA_KEY,
    MAX_METADATA_PAIRS,
    MAX_METADATA_VALUE,
    MAX_STOP,
    PART_TYPES,
    REASONING_EFFORTS,
    RESPONSE_FORMATS,
    SERVICE_TIERS,
    TOOL_CHOICES,
    ChatMessage,
    ChatRequest,
)

__all__ = ["check_chat_request"]

_FUNCTION_NAME = re.compile(FUNCTION_NAME_PATTERN)


def check_chat_request(request: ChatRequest) -> ChatRequest:
    """The request to serve: 400 `invalid_request` naming every field that breaks a rule (the
    types were checked when the body was decoded, at the edge); legacy function calling said
    as tools (a new request), else `request` itself."""
    problems, legacy = _check(request)
    if problems:
        raise InvalidRequest(fields_message(problems), details=problems)
    return legacy_to_tools(request) if legacy else request


def _set(value: Any) -> bool:
    return value is not UNSET and value is not None


def _check(r: ChatRequest) -> tuple[list[ErrorDetail], bool]:
    """The problems, and whether the request uses legacy function calling anywhere."""
    out: list[ErrorDetail] = []
    legacy = False

    def bad(field: str, message: str) -> None:
        out.append(ErrorDetail(field=field, message=message))

    if not r.model:
        bad("model", "must be a model id or 'auto'")
    if not r.messages:
        bad("messages", "must contain at least one message")
    for index, message in enumerate(r.messages):
        if _check_message(index, message, bad):
            legacy = True
    _range(r.temperature, "temperature", 0.0, 2.0, bad)
    _range(r.top_p, "top_p", 0.0, 1.0, bad)
    _range(r.frequency_penalty, "frequency_penalty", -2.0, 2.0, bad)
    _range(r.presence_penalty, "presence_penalty", -2.0, 2.0, bad)
    for name in ("max_tokens", "max_completion_tokens"):
        value = getattr(r, name)
        if _set(value) and value < 1:
            bad(name, "must be at least 1")
    if (
        _set(r.max_tokens)
        and _set(r.max_completion_tokens)
        and (r.max_tokens != r.max_completion_tokens)
    ):
        bad("max_tokens", "max_tokens is the legacy name of max_completion_tokens; send one")
    if _set(r.n) and not 1 <= r.n <= 128:  # type: ignore[operator]
        bad("n", "must be between 1 and 128")
    if _set(r.top_logprobs):
        if not 0 <= r.top_logprobs <= 20:  # type: ignore[operator]
            bad("top_logprobs", "must be between 0 and 20")
        if r.logprobs is not True:
            bad("top_logprobs", "requires logprobs to be true")
    if _set(r.stream_options) and r.stream is not True:
        bad("stream_options", "only allowed when stream is true")
    if isinstance(r.stop, list) and len(r.stop) > MAX_STOP:
        bad("stop", f"at most {MAX_STOP} stop sequences")
    if _set(r.logit_bias):
        for token, bias in r.logit_bias.items():  # type: ignore[union-attr]
            if not -100 <= bias <= 100:
                bad(f"logit_bias.{token}", "must be between -100 and 100")
    _one_of(r.reasoning_effort, "reasoning_effort", REASONING_EFFORTS, bad)
    _one_of(r.service_tier, "service_tier", SERVICE_TIERS, bad)
    if r.response_format is not UNSET:
        _one_of(r.response_format.get("type"), "response_format.type", RESPONSE_FORMATS, bad)
    names = _check_tools(r, bad)
    if r.functions is not UNSET or r.function_call is not UNSET:
        legacy = True
        out += legacy_problems(r, names)
    _check_metadata(r, bad)
    return out, legacy


def _range(value: Any, field: str, low: float, high: float, bad: Any) -> None:
    if _set(value) and not low <= value <= high:
        bad(field, f"must be between {low:g} and {high:g}")


def _one_of(value: Any, field: str, allowed: tuple[str, ...], bad: Any) -> None:
    if _set(value) and value not in allowed:
        bad(field, f"must be one of: {', '.join(allowed)}")


def _check_message(index: int, m: ChatMessage, bad: Any) -> bool:
    """Checks one message; whether it is of legacy function calling."""
    field = f"messages[{index}]"
    content = m.content
    if isinstance(content, list):
        if not content:
            bad(f"{field}.content", "must not be an empty list")
        for position, part in enumerate(content):
            kind = part.get("type")
            if kind not in PART_TYPES:
                bad(f"{field}.content[{position}].type", f"must be one of: {', '.join(PART_TYPES)}")
            elif kind == "text" and not isinstance(part.get("text"), str):
                bad(f"{field}.content[{position}].text", "must be a string")
    if m.role in ("system", "developer", "user") and not _set(content):
        bad(f"{field}.content", f"required for role {m.role}")
    elif (
        m.role == "assistant"
        and not _set(content)
        and not _set(m.tool_calls)
        and not _set(m.function_call)
    ):
        bad(f"{field}.content", "an assistant message needs content or tool_calls")
    elif m.role == "tool" and not _set(m.tool_call_id):
        bad(f"{field}.tool_call_id", "required for role tool")
    if m.tool_calls is not UNSET and m.role != "assistant":
        bad(f"{field}.tool_calls", "only assistant messages carry tool_calls")
    if m.role == "function":
        if not _set(m.name):
            bad(f"{field}.name", "required for role function (the function's name)")
        return True
    return _set(m.function_call)


def _check_tools(r: ChatRequest, bad: Any) -> set[str]:
    """Checks `tools` and `tool_choice` (`functions` too); the names of the functions given."""
    names: set[str] = set()
    if r.tools is not UNSET:
        for index, tool in enumerate(r.tools):
            if not _FUNCTION_NAME.fullmatch(tool.function.name):  # no trailing newline
                bad(f"tools[{index}].function.name", f"must match {FUNCTION_NAME_PATTERN}")
            names.add(tool.function.name)
    if r.functions is not UNSET:
        for index, legacy in enumerate(r.functions):
            if not _FUNCTION_NAME.fullmatch(legacy.name):
                bad(f"functions[{index}].name", f"must match {FUNCTION_NAME_PATTERN}")
            names.add(legacy.name)
    choice = r.tool_choice
    if isinstance(choice, str):
        _one_of(choice, "tool_choice", TOOL_CHOICES, bad)
        if choice == "required" and not names:
            bad("tool_choice", "'required' needs tools")
    elif isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if choice.get("type") != "function" or not isinstance(name, str):
            bad("tool_choice", "must be {type: 'function', function: {name}}")
        elif name not in names:
            bad("tool_choice.function.name", f"no tool named {name!r}")
    if _set(r.parallel_tool_calls) and r.tools is UNSET:
        bad("parallel_tool_calls", "only allowed when tools are given")
    return names


def _check_metadata(r: ChatRequest, bad: Any) -> None:
    if not _set(r.metadata):
        return
    metadata = r.metadata
    assert isinstance(metadata, dict)
    if len(metadata) > MAX_METADATA_PAIRS:
        bad("metadata", f"at most {MAX_METADATA_PAIRS} key-value pairs")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY or len(value) > MAX_METADATA_VALUE:
            bad(
                f"metadata.{key}",
                f"keys are at most {MAX_METADATA_KEY} characters, values at most "
                f"{MAX_METADATA_VALUE}",
            )
