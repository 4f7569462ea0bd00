"""A Responses API body -> the chat service's request (`gateway.schemas.chat.ChatRequest`).

    instructions                     a system message, first
    input (a string)                 one user message
    message items                    by role; input_text / output_text / refusal -> text,
                                     input_image -> an image_url part (URL or data URL)
    function_call, custom_tool_call  the assistant message's tool_calls (consecutive calls
                                     join one message; a custom call's input is the
                                     arguments {"input": ...})
    function_call_output,            tool messages (text parts joined; images left out, as
                                     chat tool results carry text)
    custom_tool_call_output
    reasoning items                  dropped (no translated upstream can read another's
                                     encrypted reasoning), but the gateway's own
                                     (`SIGNED_THINKING`): the next assistant message's
                                     thinking_blocks
    function tools                   function tools (strict kept)
    namespace tools                  each of its tools offered as `<namespace>__<name>`; their
                                     calls come back with `namespace` and `name` apart
    custom tools                     function tools taking one string, {"input": ...};
                                     their calls come back as custom_tool_call items
    built-in tools (web_search,      dropped from the offer and named (`dropped`); a 400
    file_search, local_shell, ...)   naming the tool when tool_choice forces one
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
    store, include, truncation,      accepted; no state is kept (`store` is never sent to an
    service_tier, top_logprobs,      upstream)
    max_tool_calls

Problems (`ResponsesTranslation.problems`, each naming the field): what only an upstream that
speaks the Responses API can serve, so the call is passed through to an OpenAI or Azure OpenAI
route or refused with a 400 naming the fields: `previous_response_id`, `conversation`,
`prompt`, `background: true`, `item_reference` items, input files, items and parts of types
not listed here, and a `tool_choice` that forces a built-in tool.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec import UNSET

from gateway.errors import ErrorDetail, InvalidRequest, decode_detail, fields_message
from gateway.http.json_body import decode_json
from gateway.schemas.chat import (
    FUNCTION_NAME_PATTERN,
    ChatMessage,
    ChatRequest,
    FunctionDefinition,
    ToolDefinition,
)
from gateway.schemas.responses import InputTokensRequest, ResponsesRequest

__all__ = [
    "CUSTOM_INPUT",
    "NAMESPACE_JOIN",
    "SIGNED_THINKING",
    "ResponsesTranslation",
    "ToolNames",
    "client_field",
    "decode_responses",
    "to_chat_request",
]

CUSTOM_INPUT = "input"
"""The one string argument a custom (freeform) tool takes when offered as a function."""
_CUSTOM_PARAMETERS = {
    "type": "object",
    "properties": {CUSTOM_INPUT: {"type": "string", "description": "The tool's whole input."}},
    "required": [CUSTOM_INPUT],
    "additionalProperties": False,
}
SIGNED_THINKING = "gw-thinking:"
"""Starts the `encrypted_content` of a reasoning item the gateway made from an upstream's
signed thinking blocks (their JSON, base64url): given back, they become the next assistant
message's `thinking_blocks`, so a model that signs its thinking (Claude) keeps it across a
tool loop. Any other encrypted content is another upstream's and is dropped."""
NAMESPACE_JOIN = "__"
"""Joins a namespace's name and its tool's into the one function name an upstream is offered."""
_TOOL_NAME = re.compile(FUNCTION_NAME_PATTERN)
_NATIVE_ONLY = "only served by OpenAI and Azure OpenAI upstreams (passed through as sent)"
_STATEFUL = f"needs state kept by the upstream, so it is {_NATIVE_ONLY}"
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")
_DROPPED_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "compaction",
    }
)
"""Items kept by a client from another upstream's answers that no translated upstream reads."""

_decode_object = msgspec.json.Decoder(dict[str, Any])
_decode_count = msgspec.json.Decoder(InputTokensRequest)
_encode = msgspec.json.Encoder().encode


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


def _invalid(field_name: str, message: str) -> InvalidRequest:
    detail = ErrorDetail(field=field_name, message=message)
    return InvalidRequest(fields_message([detail]), details=[detail])


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
        messages += _Input(problems).messages(items)
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
        problems.append(ErrorDetail(field="previous_response_id", message=_STATEFUL))
    if request.conversation is not UNSET and request.conversation is not None:
        problems.append(ErrorDetail(field="conversation", message=_STATEFUL))
    if isinstance(request, ResponsesRequest):
        if request.prompt is not UNSET and request.prompt is not None:
            problems.append(ErrorDetail(field="prompt", message=_STATEFUL))
        if request.background is True:
            problems.append(ErrorDetail(field="background", message=_STATEFUL))


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
            raise _invalid("text.format.schema", "this field is required")
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
        raise _invalid("text.format.type", "must be one of: text, json_schema, json_object")


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
            raise _invalid(f"{i}.name", f"must match {FUNCTION_NAME_PATTERN}")
        if namespace is not None:
            flat = f"{namespace}{NAMESPACE_JOIN}{name}"
            if not _TOOL_NAME.fullmatch(flat):
                raise _invalid(
                    f"{i}.name", f"with its namespace must match {FUNCTION_NAME_PATTERN}"
                )
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
            raise _invalid(f"tools[{i}].type", "expected an object with a string type")
        if tool["type"] != "namespace":
            yield f"tools[{i}]", tool, None
            continue
        namespace, inner = tool.get("name"), tool.get("tools")
        if not isinstance(namespace, str) or not isinstance(inner, list):
            raise _invalid(f"tools[{i}]", "a namespace needs a name and a list of tools")
        for j, member in enumerate(inner):
            if not isinstance(member, dict) or not isinstance(member.get("type"), str):
                raise _invalid(f"tools[{i}].tools[{j}].type", "expected an object with a type")
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
            raise _invalid("tool_choice", "must be one of: none, auto, required, or an object")
        if choice == "required" and not offered:
            if translation.dropped:
                _forced(translation, translation.dropped)
                return
            raise _invalid("tool_choice", "'required' needs at least one tool")
        if offered:
            chat.tool_choice = choice
        return
    if not isinstance(choice, dict):
        raise _invalid("tool_choice", "expected a string or an object")
    kind = choice.get("type")
    if kind in ("function", "custom"):
        name = choice.get("name")
        if not isinstance(name, str) or name not in offered:
            raise _invalid("tool_choice.name", f"no tool named {name!r}")
        chat.tool_choice = {"type": "function", "function": {"name": name}}
    elif kind == "allowed_tools":
        _allowed_tools(choice, offered, translation)
    elif isinstance(kind, str):
        if kind in translation.dropped:
            _forced(translation, [kind])
            return
        raise _invalid("tool_choice.type", f"no tool of type {kind!r} was offered")
    else:
        raise _invalid("tool_choice.type", "expected a string")


def _allowed_tools(
    choice: dict[str, Any], offered: dict[str, Any], translation: ResponsesTranslation
) -> None:
    listed = choice.get("tools")
    mode = choice.get("mode", "auto")
    if not isinstance(listed, list) or mode not in ("auto", "required"):
        raise _invalid("tool_choice", "allowed_tools needs tools (a list) and mode auto/required")
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
    message = f"forces {tools}, a built-in tool {_NATIVE_ONLY}"
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


class _Input:
    """The input items as chat messages (see the module docstring)."""

    def __init__(self, problems: list[ErrorDetail]) -> None:
        self.out: list[ChatMessage] = []
        self.problems = problems
        self.thinking: list[dict[str, Any]] = []  # signed blocks for the next assistant turn

    def _assistant(self, message: ChatMessage) -> ChatMessage:
        if self.thinking:
            message.thinking_blocks = self.thinking
            self.thinking = []
        self.out.append(message)
        return message

    def _reasoning(self, item: dict[str, Any]) -> None:
        encrypted = item.get("encrypted_content")
        if not isinstance(encrypted, str) or not encrypted.startswith(SIGNED_THINKING):
            return
        try:
            blocks = msgspec.json.decode(
                base64.urlsafe_b64decode(encrypted.removeprefix(SIGNED_THINKING))
            )
        except (ValueError, msgspec.DecodeError):
            return
        if isinstance(blocks, list):
            self.thinking += [block for block in blocks if isinstance(block, dict)]

    def problem(self, field_name: str, message: str) -> None:
        self.problems.append(ErrorDetail(field=field_name, message=message))

    def messages(self, items: list[Any]) -> list[ChatMessage]:
        for i, item in enumerate(items):
            at = f"input[{i}]"
            if not isinstance(item, dict):
                raise _invalid(at, "expected an object")
            kind = item.get("type", "message" if "role" in item else None)
            if kind == "message":
                self._message(item, at)
            elif kind in ("function_call", "custom_tool_call"):
                self._call(item, kind, at)
            elif kind in ("function_call_output", "custom_tool_call_output"):
                self._output(item, at)
            elif kind == "reasoning":
                self._reasoning(item)
            elif kind in _DROPPED_ITEMS:
                continue
            elif kind == "item_reference":
                self.problem(f"{at}.type", f"item_reference {_STATEFUL}")
            else:
                self.problem(f"{at}.type", f"{kind!r} items are {_NATIVE_ONLY}")
        return self.out

    def _message(self, item: dict[str, Any], at: str) -> None:
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise _invalid(f"{at}.role", "must be one of: user, assistant, system, developer")
        content = item.get("content")
        if role != "assistant":
            self.thinking = []  # a turn of another role: the blocks belonged to no answer
        if isinstance(content, str):
            if role == "assistant":
                self._assistant(ChatMessage(role=role, content=content))
            else:
                self.out.append(ChatMessage(role=role, content=content))
            return
        if not isinstance(content, list):
            raise _invalid(f"{at}.content", "expected a string or an array of parts")
        if role == "assistant":
            text = "".join(self._texts(content, f"{at}.content"))
            self._assistant(ChatMessage(role="assistant", content=text))
            return
        parts: list[dict[str, Any]] = []
        for j, part in enumerate(content):
            converted = self._part(part, f"{at}.content[{j}]")
            if converted is not None:
                parts.append(converted)
        if not parts:
            return
        if role in ("system", "developer"):
            texts = [part["text"] for part in parts if part["type"] == "text"]
            self.out.append(ChatMessage(role=role, content="\n".join(texts)))
        else:
            self.out.append(ChatMessage(role="user", content=parts))

    def _part(self, part: object, at: str) -> dict[str, Any] | None:
        if not isinstance(part, dict):
            raise _invalid(at, "expected an object")
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            text = part.get("text")
            if not isinstance(text, str):
                raise _invalid(f"{at}.text", "expected a string")
            return {"type": "text", "text": text}
        if kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str) or not url:
                raise _invalid(f"{at}.image_url", "an image URL or data URL is required")
            image: dict[str, Any] = {"url": url}
            if part.get("detail") in ("low", "high", "auto"):
                image["detail"] = part["detail"]
            return {"type": "image_url", "image_url": image}
        self.problem(f"{at}.type", f"{kind!r} parts are {_NATIVE_ONLY}")
        return None

    def _texts(self, parts: list[Any], at: str) -> list[str]:
        texts: list[str] = []
        for j, part in enumerate(parts):
            if not isinstance(part, dict):
                raise _invalid(f"{at}[{j}]", "expected an object")
            kind = part.get("type")
            text = part.get("refusal") if kind == "refusal" else part.get("text")
            if kind not in (*_TEXT_PARTS, "refusal") or not isinstance(text, str):
                self.problem(f"{at}[{j}].type", f"{kind!r} parts are {_NATIVE_ONLY}")
                continue
            texts.append(text)
        return texts

    def _call(self, item: dict[str, Any], kind: str, at: str) -> None:
        call_id, name = item.get("call_id"), item.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise _invalid(at, f"a {kind} item needs call_id and name strings")
        namespace = item.get("namespace")
        if isinstance(namespace, str) and namespace:
            name = f"{namespace}{NAMESPACE_JOIN}{name}"
        if kind == "custom_tool_call":
            text = item.get("input")
            arguments = _encode({CUSTOM_INPUT: text if isinstance(text, str) else ""}).decode()
        else:
            raw = item.get("arguments")
            arguments = raw if isinstance(raw, str) else ""
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        last = self.out[-1] if self.out else None
        if last is not None and last.role == "assistant" and not self.thinking:
            calls = last.tool_calls if last.tool_calls is not UNSET else []
            last.tool_calls = [*calls, call]
            if last.content == "":
                last.content = None
        else:
            self._assistant(ChatMessage(role="assistant", content=None, tool_calls=[call]))

    def _output(self, item: dict[str, Any], at: str) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _invalid(f"{at}.call_id", "this field is required")
        self.thinking = []
        output = item.get("output", "")
        if isinstance(output, list):
            texts = []
            for j, part in enumerate(output):
                converted = self._part(part, f"{at}.output[{j}]")
                if converted is not None and converted["type"] == "text":
                    texts.append(converted["text"])
            output = "\n".join(texts)
        elif not isinstance(output, str):
            output = _encode(output).decode()
        self.out.append(ChatMessage(role="tool", tool_call_id=call_id, content=output))
