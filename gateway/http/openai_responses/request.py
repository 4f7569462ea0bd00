"""A Responses API body -> the chat service's request (`gateway.schemas.chat.ChatRequest`).

    instructions                     a system message, first
    input (a string)                 one user message
    input items                      messages (`items`: message, function and custom tool
                                     calls and outputs; reasoning dropped but the gateway's
                                     own signed thinking)
    function tools                   function tools (strict kept)
    namespace tools                  each of its tools offered as `<namespace>__<name>`; their
                                     calls come back with `namespace` and `name` apart
    custom tools                     function tools taking one string, {"input": ...};
                                     their calls come back as custom_tool_call items
    built-in tools (web_search,      dropped from the offer and named (`dropped`); a
    file_search, local_shell, ...)   problem when tool_choice forces one
    tool_choice                      none/auto/required, a named function or custom tool,
                                     allowed_tools (the offer cut to the listed tools)
    parallel_tool_calls              kept (with tools)
    reasoning.effort                 reasoning_effort
    text.format                      json_schema / json_object -> response_format;
                                     text.verbosity -> verbosity
    max_output_tokens                max_completion_tokens
    temperature, top_p, metadata,    kept
    user, safety_identifier,
    prompt_cache_key
    store, include, truncation,      accepted (`store` is never sent to an upstream: the
    service_tier, top_logprobs,      gateway keeps the response itself, `state.py`)
    max_tool_calls

`previous_response_id` is resolved before this translation, from the gateway's store
(`gateway.http.openai_responses.state`): the request translated here carries the earlier turns
in its input instead.

Problems (`ResponsesTranslation.problems`, each naming the field): what only an upstream that
speaks the Responses API can serve, so the call is passed through to an OpenAI or Azure OpenAI
route or refused with a 400 naming the fields: `conversation`, `prompt`, `background: true`,
`item_reference` items, input files, items and parts of types not listed here, and a
`tool_choice` that forces a built-in tool.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec import UNSET

from gateway.errors import ErrorDetail, InvalidRequest, decode_detail, fields_message
from gateway.http.json_body import decode_json
from gateway.http.openai_responses.items import (
    CUSTOM_INPUT,
    NAMESPACE_JOIN,
    NATIVE_ONLY,
    STATEFUL,
    InputItems,
    invalid,
)
from gateway.schemas.chat import (
    FUNCTION_NAME_PATTERN,
    ChatMessage,
    ChatRequest,
    FunctionDefinition,
    ToolDefinition,
)
from gateway.schemas.responses import InputTokensRequest, ResponsesRequest

__all__ = [
    "ResponsesTranslation",
    "ToolNames",
    "client_field",
    "decode_input_tokens",
    "decode_responses",
    "to_chat_request",
]

_CUSTOM_PARAMETERS = {
    "type": "object",
    "properties": {CUSTOM_INPUT: {"type": "string", "description": "The tool's whole input."}},
    "required": [CUSTOM_INPUT],
    "additionalProperties": False,
}
_TOOL_NAME = re.compile(FUNCTION_NAME_PATTERN)


_decode_object = msgspec.json.Decoder(dict[str, Any])
_decode_count = msgspec.json.Decoder(InputTokensRequest)


def decode_responses(body: bytes) -> tuple[ResponsesRequest, dict[str, Any]]:
    """The typed request and the body as decoded (what passthrough routes are sent); a 400
    naming the field for a body that breaks its types."""
    raw = decode_json(body, _decode_object, InvalidRequest)
    try:
        request = msgspec.convert(raw, ResponsesRequest)
    except msgspec.ValidationError as exc:
        detail = decode_detail(exc)
        raise InvalidRequest(fields_message([detail]), details=[detail]) from exc
    return request, raw


def decode_input_tokens(body: bytes) -> InputTokensRequest:
    """An input_tokens request, typed; a 400 naming the field as `decode_responses`."""
    return decode_json(body, _decode_count, InvalidRequest)


@dataclass(frozen=True, slots=True)
class ToolNames:
    """What a called function's name means in the client's terms."""

    custom: frozenset[str] = frozenset()
    """Tools offered as functions that answer as custom_tool_call items."""
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Offered name -> (namespace, name) of the tools of a namespace, offered flattened."""


@dataclass(slots=True)
class ResponsesTranslation:
    """One request translated: the service's request and what the answer needs to know."""

    chat: ChatRequest
    names: ToolNames = field(default_factory=ToolNames)
    problems: list[ErrorDetail] = field(default_factory=list)
    """What only an upstream that speaks the Responses API can serve (each naming the field):
    with any, the call goes to such a route or is refused with these details."""
    dropped: list[str] = field(default_factory=list)
    """Built-in tools left out of the offer (the `x-gateway-dropped-tools` header)."""
    echo: dict[str, Any] = field(default_factory=dict)
    """The request's fields the response object repeats (tools, tool_choice, ...)."""


_CLIENT_FIELDS = (
    ("max_completion_tokens", "max_output_tokens"),
    ("max_tokens", "max_output_tokens"),
    ("messages", "input"),
    ("reasoning_effort", "reasoning.effort"),
    ("response_format", "text.format"),
    ("verbosity", "text.verbosity"),
    ("tools", "tools"),
)


def client_field(chat_field: str) -> str:
    """The Responses API's name for a field of the chat request a refusal names (an index into
    `messages` or `tools` does not survive the translation: the list's name stands)."""
    for chat_name, name in _CLIENT_FIELDS:
        if chat_field == chat_name or chat_field.startswith((chat_name + "[", chat_name + ".")):
            return name
    return chat_field


def to_chat_request(request: InputTokensRequest) -> ResponsesTranslation:
    """The service's request for `request` (see the module docstring)."""
    problems: list[ErrorDetail] = []
    _stateful(request, problems)
    messages: list[ChatMessage] = []
    if isinstance(request.instructions, str) and request.instructions:
        messages.append(ChatMessage(role="system", content=request.instructions))
    items = request.input
    if isinstance(items, str):
        messages.append(ChatMessage(role="user", content=items))
    elif isinstance(items, list):
        messages += InputItems(problems).messages(items)
    chat = ChatRequest(model=request.model, messages=messages)
    translation = ResponsesTranslation(chat=chat, problems=problems)
    offered = _tools(request.tools or [], translation)
    _tool_choice(request.tool_choice, offered, translation)
    if offered:
        chat.tools = list(offered.values())
        if request.parallel_tool_calls is not UNSET and request.parallel_tool_calls is not None:
            chat.parallel_tool_calls = request.parallel_tool_calls
    reasoning = request.reasoning
    if reasoning is not UNSET and reasoning is not None and isinstance(reasoning.effort, str):
        chat.reasoning_effort = reasoning.effort
    text = request.text
    if text is not UNSET and text is not None:
        _text_config(chat, text.format, text.verbosity)
    if isinstance(request, ResponsesRequest):
        _sampling(chat, request)
    translation.echo = _echo(request, translation)
    return translation


def _stateful(request: InputTokensRequest, problems: list[ErrorDetail]) -> None:
    if request.previous_response_id:
        problems.append(ErrorDetail(field="previous_response_id", message=STATEFUL))
    if request.conversation is not UNSET and request.conversation is not None:
        problems.append(ErrorDetail(field="conversation", message=STATEFUL))
    if isinstance(request, ResponsesRequest):
        if request.prompt is not UNSET and request.prompt is not None:
            problems.append(ErrorDetail(field="prompt", message=STATEFUL))
        if request.background is True:
            problems.append(ErrorDetail(field="background", message=STATEFUL))


def _sampling(chat: ChatRequest, request: ResponsesRequest) -> None:
    if request.stream is True:
        chat.stream = True
    if isinstance(request.max_output_tokens, int):
        chat.max_completion_tokens = request.max_output_tokens
    if request.temperature is not UNSET and request.temperature is not None:
        chat.temperature = request.temperature
    if request.top_p is not UNSET and request.top_p is not None:
        chat.top_p = request.top_p
    if request.metadata:
        chat.metadata = request.metadata
    if request.user:
        chat.user = request.user
    if request.safety_identifier:
        chat.safety_identifier = request.safety_identifier
    if request.prompt_cache_key:
        chat.prompt_cache_key = request.prompt_cache_key


def _text_config(chat: ChatRequest, output: object, verbosity: object) -> None:
    if isinstance(verbosity, str):
        chat.verbosity = verbosity
    if not isinstance(output, dict):
        return
    kind = output.get("type")
    if kind == "json_schema":
        schema = output.get("schema")
        name = output.get("name")
        if not isinstance(schema, dict):
            raise invalid("text.format.schema", "this field is required")
        json_schema: dict[str, Any] = {
            "name": name if isinstance(name, str) and name else "output",
            "schema": schema,
        }
        if isinstance(output.get("strict"), bool):
            json_schema["strict"] = output["strict"]
        if isinstance(output.get("description"), str):
            json_schema["description"] = output["description"]
        chat.response_format = {"type": "json_schema", "json_schema": json_schema}
    elif kind == "json_object":
        chat.response_format = {"type": "json_object"}
    elif kind != "text":
        raise invalid("text.format.type", "must be one of: text, json_schema, json_object")


def _tools(tools: list[dict[str, Any]], translation: ResponsesTranslation) -> dict[str, Any]:
    """name -> the function offered for it; built-in tools are named in `dropped`."""
    offered: dict[str, ToolDefinition] = {}
    custom: set[str] = set()
    namespaced: dict[str, tuple[str, str]] = {}
    for i, tool, namespace in _flattened(tools):
        kind = tool["type"]
        if kind not in ("function", "custom"):
            translation.dropped.append(kind)
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise invalid(f"{i}.name", f"must match {FUNCTION_NAME_PATTERN}")
        if namespace is not None:
            flat = f"{namespace}{NAMESPACE_JOIN}{name}"
            if not _TOOL_NAME.fullmatch(flat):
                raise invalid(f"{i}.name", f"with its namespace must match {FUNCTION_NAME_PATTERN}")
            namespaced[flat] = (namespace, name)
            name = flat
        function = FunctionDefinition(name=name)
        description = tool.get("description")
        if kind == "custom":
            custom.add(name)
            function.parameters = _CUSTOM_PARAMETERS
            text = description if isinstance(description, str) else ""
            grammar = _grammar_note(tool.get("format"))
            description = f"{text}\n\n{grammar}".strip() if grammar else text
        else:
            parameters = tool.get("parameters")
            if isinstance(parameters, dict):
                function.parameters = parameters
            if isinstance(tool.get("strict"), bool):
                function.strict = tool["strict"]
        if isinstance(description, str) and description:
            function.description = description
        offered[name] = ToolDefinition(type="function", function=function)
    translation.names = ToolNames(custom=frozenset(custom), namespaced=namespaced)
    return offered


def _flattened(tools: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], str | None]]:
    """(field, tool, its namespace) of each tool, a namespace's tools in its place."""
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise invalid(f"tools[{i}].type", "expected an object with a string type")
        if tool["type"] != "namespace":
            yield f"tools[{i}]", tool, None
            continue
        namespace, inner = tool.get("name"), tool.get("tools")
        if not isinstance(namespace, str) or not isinstance(inner, list):
            raise invalid(f"tools[{i}]", "a namespace needs a name and a list of tools")
        for j, member in enumerate(inner):
            if not isinstance(member, dict) or not isinstance(member.get("type"), str):
                raise invalid(f"tools[{i}].tools[{j}].type", "expected an object with a type")
            yield f"tools[{i}].tools[{j}]", member, namespace


def _grammar_note(output: object) -> str:
    """A custom tool's input grammar, told to a model that only knows JSON arguments."""
    if not isinstance(output, dict) or output.get("type") != "grammar":
        return ""
    definition = output.get("definition")
    if not isinstance(definition, str) or not definition:
        return ""
    syntax = output.get("syntax", "lark")
    return f"The `{CUSTOM_INPUT}` string must follow this {syntax} grammar:\n{definition}"


def _tool_choice(
    choice: object, offered: dict[str, Any], translation: ResponsesTranslation
) -> None:
    chat = translation.chat
    if choice is UNSET or choice is None:
        return
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            raise invalid("tool_choice", "must be one of: none, auto, required, or an object")
        if choice == "required" and not offered:
            if translation.dropped:
                _forced(translation, translation.dropped)
                return
            raise invalid("tool_choice", "'required' needs at least one tool")
        if offered:
            chat.tool_choice = choice
        return
    if not isinstance(choice, dict):
        raise invalid("tool_choice", "expected a string or an object")
    kind = choice.get("type")
    if kind in ("function", "custom"):
        name = choice.get("name")
        if not isinstance(name, str) or name not in offered:
            raise invalid("tool_choice.name", f"no tool named {name!r}")
        chat.tool_choice = {"type": "function", "function": {"name": name}}
    elif kind == "allowed_tools":
        _allowed_tools(choice, offered, translation)
    elif isinstance(kind, str):
        if kind in translation.dropped:
            _forced(translation, [kind])
            return
        raise invalid("tool_choice.type", f"no tool of type {kind!r} was offered")
    else:
        raise invalid("tool_choice.type", "expected a string")


def _allowed_tools(
    choice: dict[str, Any], offered: dict[str, Any], translation: ResponsesTranslation
) -> None:
    listed = choice.get("tools")
    mode = choice.get("mode", "auto")
    if not isinstance(listed, list) or mode not in ("auto", "required"):
        raise invalid("tool_choice", "allowed_tools needs tools (a list) and mode auto/required")
    names = {t.get("name") for t in listed if isinstance(t, dict)}
    builtins = [t.get("type") for t in listed if isinstance(t, dict) and t.get("name") is None]
    kept = {name: tool for name, tool in offered.items() if name in names}
    if mode == "required" and not kept:
        _forced(translation, [str(kind) for kind in builtins] or ["(no tool)"])
    for name in list(offered):
        if name not in kept:
            del offered[name]
    if kept:
        translation.chat.tool_choice = mode


def _forced(translation: ResponsesTranslation, kinds: list[str]) -> None:
    """tool_choice forces a built-in tool: only an upstream that runs it can serve the call."""
    tools = ", ".join(repr(k) for k in kinds)
    message = f"forces {tools}, a built-in tool {NATIVE_ONLY}"
    translation.problems.append(ErrorDetail(field="tool_choice", message=message))


def _echo(request: InputTokensRequest, translation: ResponsesTranslation) -> dict[str, Any]:
    tools = [
        tool
        for tool in request.tools or ()
        if isinstance(tool, dict) and tool.get("type") in ("function", "custom", "namespace")
    ]
    choice = request.tool_choice
    echo: dict[str, Any] = {
        "instructions": request.instructions if isinstance(request.instructions, str) else None,
        "tools": tools,
        "tool_choice": choice if isinstance(choice, (str, dict)) else "auto",
        "parallel_tool_calls": request.parallel_tool_calls is not False,
        "previous_response_id": None,
        "reasoning": msgspec.to_builtins(request.reasoning) if request.reasoning else None,
        "text": msgspec.to_builtins(request.text) if request.text else {"format": {"type": "text"}},
    }
    if isinstance(request, ResponsesRequest):
        echo.update(
            max_output_tokens=request.max_output_tokens or None,
            temperature=_or_none(request.temperature, 1.0),
            top_p=_or_none(request.top_p, 1.0),
            metadata=request.metadata or {},
            user=request.user or None,
            store=request.store is not False,
            truncation=request.truncation or "disabled",
        )
    return echo


def _or_none(value: object, default: float) -> object:
    return default if value is UNSET or value is None else value
