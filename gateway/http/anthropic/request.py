"""A Messages API body -> the chat service's request (`gateway.schemas.chat.ChatRequest`), for
upstreams that do not speak Anthropic's API.

Only what the gateway must understand is checked when the body is decoded (the model, the
limits, `stream`, the types of the fields it reads): a 400 naming the field as the client wrote
it, whatever the upstream. What an OpenAI-format request cannot carry is not an error here but
a *problem* (a detail naming the field): the service then serves the call only on upstreams
that take the body as is (Anthropic's), and refuses it with those details when the call has
none. Fields that only tune Anthropic's behaviour are *dropped* for the others and named.

    system (string or text blocks)   a system message (cache_control dropped)
    role "system" messages,          a system message in place (mid-conversation
    mid_conv_system blocks           instructions); each upstream adapter carries it as its
                                     API can (docs/providers.md)
    text / image blocks              text and image_url parts (base64 -> a data URL)
    document blocks                  plain text and content sources -> text parts (title and
                                     context first); base64 PDF -> a file part
    search_result blocks             a text part: title, source, then its text blocks
    tool_use, tool_result            assistant tool_calls, tool messages (text results)
    thinking, redacted_thinking      the assistant message's `thinking_blocks`, signed
    tools (custom), tool_choice      function tools (`strict` only when the tool says so),
                                     none/auto/required/named;
                                     disable_parallel_tool_use -> parallel_tool_calls false
    thinking {enabled, budget}       reasoning_effort by the budget; {adaptive} -> medium
    output_config, output_format     effort -> reasoning_effort (max -> xhigh); format
                                     {json_schema} -> response_format json_schema, the schema
                                     as written (`strict` only when the format says so)
    stop_sequences, metadata.user_id stop (at most 4), user
    cache_control (in blocks), tool_result is_error   dropped
    dropped and named                `TUNING_FIELDS` (context_management, top-level
                                     cache_control, service_tier, top_k, diagnostics, ...)
    problems                         other blocks (URL and file documents, unknown types),
                                     images in tool results, Anthropic's typed tools, other
                                     roles, more than 4 stop sequences, max_tokens 0 (cache
                                     warming), fields this gateway does not know

Refused whatever the upstream, because the routing file's prices would not cover them: server
tools that Anthropic bills per use beyond tokens (web search, code execution, and any typed
tool this gateway does not know), `speed: "fast"` and an `inference_geo` other than `global`
(priced above the model's standard rates), and `fallbacks` (an answer from another model).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, TypeVar

import msgspec
from msgspec import UNSET

from gateway.errors import ErrorDetail, InvalidRequest, decode_detail, fields_message
from gateway.http.json_body import decode_json
from gateway.schemas.chat import (
    FUNCTION_NAME_PATTERN,
    MAX_STOP,
    ChatMessage,
    ChatRequest,
    FunctionDefinition,
    ToolDefinition,
)
from gateway.schemas.messages import (
    TOP_LEVEL_FIELDS,
    TUNING_FIELDS,
    CountTokensRequest,
    MessagesRequest,
)

__all__ = ["ChatTranslation", "decode_messages", "to_chat_request"]

_decode_object = msgspec.json.Decoder(dict[str, Any])
_encode = msgspec.json.Encoder().encode
_TOOL_NAME = re.compile(FUNCTION_NAME_PATTERN)
_NATIVE_ONLY = "only taken by Anthropic upstreams"
_UNPRICED = (
    "is billed by Anthropic beyond the model's token prices, which this gateway does not charge"
)
# thinking.budget_tokens -> reasoning_effort: the smallest effort whose budget covers it
_EFFORTS = ((1024, "minimal"), (2048, "low"), (8192, "medium"), (16384, "high"))
_TOKEN_TOOLS = ("bash_", "text_editor_", "computer_", "memory_", "web_fetch_", "tool_search_tool_")
"""Anthropic's typed tools billed as tokens only (run by the client, or fetching/searching
without a per-use price): passed to Anthropic upstreams."""
_EFFORT_OF = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}
_TUNING = frozenset(TUNING_FIELDS)
_CARRIED = TOP_LEVEL_FIELDS - _TUNING
"""The fields the translation reads (or refuses): neither dropped nor a problem."""

T = TypeVar("T", MessagesRequest, CountTokensRequest)


def decode_messages(body: bytes, kind: type[T]) -> tuple[T, dict[str, Any]]:
    """The typed request and the body as decoded (what Anthropic upstreams are sent); a 400
    naming the field for a body that breaks Anthropic's types or ranges."""
    raw = decode_json(body, _decode_object, InvalidRequest)
    typed = {k: v for k, v in raw.items() if v is not None} if None in raw.values() else raw
    try:
        request = msgspec.convert(typed, kind)
    except msgspec.ValidationError as exc:
        detail = decode_detail(exc)
        raise InvalidRequest(fields_message([detail]), details=[detail]) from exc
    problems = _block_problems(request)
    if problems:
        raise InvalidRequest(fields_message(problems), details=problems)
    return request, raw


def _block_problems(request: CountTokensRequest) -> list[ErrorDetail]:
    """Every content block, tool and system block is an object with a string `type`."""
    out: list[ErrorDetail] = []
    for i, message in enumerate(request.messages):
        if isinstance(message.content, list):
            out += _typed(message.content, f"messages[{i}].content", need_type=True)
    if isinstance(request.system, list):
        out += _typed(request.system, "system", need_type=True)
    if request.tools is not UNSET:
        out += _typed(request.tools, "tools", need_type=False)
    return out


def _typed(items: list[Any], field: str, *, need_type: bool) -> list[ErrorDetail]:
    out: list[ErrorDetail] = []
    for j, item in enumerate(items):
        if not isinstance(item, dict):
            out.append(ErrorDetail(field=f"{field}[{j}]", message="expected an object"))
        elif (need_type or "type" in item) and not isinstance(item.get("type"), str):
            out.append(ErrorDetail(field=f"{field}[{j}].type", message="expected a string"))
    return out


class ChatTranslation(NamedTuple):
    """A Messages request said as the service's request."""

    request: ChatRequest
    problems: list[ErrorDetail]
    """What it could not carry: only Anthropic upstreams may serve the call."""
    dropped: tuple[str, ...]
    """The top-level fields other upstreams are sent the call without (`TUNING_FIELDS`)."""


def to_chat_request(request: MessagesRequest, raw: dict[str, Any]) -> ChatTranslation:
    """The service's request, and what it could not carry (see the module docstring)."""
    _refuse_unpriced(request, raw.get("fallbacks"))
    translation = _Translation()
    messages = translation.messages(request)
    chat = ChatRequest(model=request.model, messages=messages)
    if request.max_tokens:
        chat.max_tokens = request.max_tokens
    else:
        translation.problem("max_tokens", f"0 (warming the prompt cache) is {_NATIVE_ONLY}")
    if request.stream is True:
        chat.stream = True
    if request.temperature is not UNSET:
        chat.temperature = request.temperature
    if request.top_p is not UNSET:
        chat.top_p = request.top_p
    stops = request.stop_sequences
    if stops is not UNSET and stops:
        if len(stops) > MAX_STOP:
            translation.problem("stop_sequences", f"more than {MAX_STOP} are {_NATIVE_ONLY}")
        else:
            chat.stop = list(stops)
    user = request.metadata.get("user_id") if request.metadata is not UNSET else None
    if isinstance(user, str) and user:
        chat.user = user
    if request.tools is not UNSET and request.tools:
        chat.tools = translation.tools(request.tools)
    if request.tool_choice is not UNSET:
        translation.tool_choice(chat, request.tool_choice)
    if request.thinking is not UNSET:
        effort = _effort(request.thinking)
        if effort is not None:
            chat.reasoning_effort = effort
    if request.output_format is not UNSET:
        _output_format(chat, request.output_format, "output_format")
    if request.output_config is not UNSET:
        _output_config(chat, request.output_config)
    dropped: list[str] = []
    for name, value in raw.items():
        if name in _CARRIED or value is None:
            continue
        if name in _TUNING:
            dropped.append(name)
        else:
            translation.problem(name, f"unknown to this gateway, so {_NATIVE_ONLY}")
    return ChatTranslation(chat, translation.problems, tuple(dropped) if dropped else ())


def _refuse_unpriced(request: MessagesRequest, raw_fallbacks: object) -> None:
    """What Anthropic prices above the model's rates, bills per use, or answers with another
    model (`fallbacks`): 400 for any upstream."""
    problems: list[ErrorDetail] = []
    if request.speed is not UNSET and request.speed != "standard":
        problems.append(ErrorDetail(field="speed", message=f"{request.speed!r} {_UNPRICED}"))
    geo = request.inference_geo
    if geo is not UNSET and geo is not None and geo != "global":
        problems.append(ErrorDetail(field="inference_geo", message=f"{geo!r} {_UNPRICED}"))
    if raw_fallbacks:
        message = "would answer with other models, whose prices this gateway does not charge"
        problems.append(ErrorDetail(field="fallbacks", message=message))
    for i, tool in enumerate(request.tools or ()):
        kind = tool.get("type", "custom")
        if kind != "custom" and not kind.startswith(_TOKEN_TOOLS):
            problems.append(ErrorDetail(field=f"tools[{i}].type", message=f"{kind!r} {_UNPRICED}"))
    if problems:
        raise InvalidRequest(fields_message(problems), details=problems)


def _output_config(chat: ChatRequest, config: dict[str, Any]) -> None:
    effort = config.get("effort")
    if isinstance(effort, str):
        if effort not in _EFFORT_OF:
            raise _invalid("output_config.effort", f"must be one of: {', '.join(_EFFORT_OF)}")
        chat.reasoning_effort = _EFFORT_OF[effort]
    output = config.get("format")
    if isinstance(output, dict):
        _output_format(chat, output, "output_config.format")


def _output_format(chat: ChatRequest, output: dict[str, Any], field: str) -> None:
    """A JSON schema answer format, the schema as the client wrote it: `strict` only when the
    format asks for it (OpenAI refuses, strict, schemas that Anthropic takes)."""
    schema = output.get("schema")
    if output.get("type") != "json_schema" or not isinstance(schema, dict):
        raise _invalid(field, "must be {type: 'json_schema', schema}")
    json_schema: dict[str, Any] = {"name": "output", "schema": schema}
    if isinstance(output.get("strict"), bool):
        json_schema["strict"] = output["strict"]
    chat.response_format = {"type": "json_schema", "json_schema": json_schema}


def _effort(thinking: dict[str, Any]) -> str | None:
    kind = thinking.get("type")
    if kind == "adaptive":
        return "medium"
    if kind != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int):
        raise _invalid("thinking.budget_tokens", "expected an integer")
    for limit, effort in _EFFORTS:
        if budget <= limit:
            return effort
    return "xhigh"


def _invalid(field: str, message: str) -> InvalidRequest:
    detail = ErrorDetail(field=field, message=message)
    return InvalidRequest(fields_message([detail]), details=[detail])


class _Translation:
    """One request's translation: the messages, tools and the problems met on the way."""

    def __init__(self) -> None:
        self.problems: list[ErrorDetail] = []

    def problem(self, field: str, message: str) -> None:
        self.problems.append(ErrorDetail(field=field, message=message))

    def messages(self, request: MessagesRequest) -> list[ChatMessage]:
        out: list[ChatMessage] = []
        system = request.system
        if isinstance(system, str):
            if system:
                out.append(ChatMessage(role="system", content=system))
        elif system is not UNSET:
            texts = self._texts(system, "system")
            if texts:
                out.append(ChatMessage(role="system", content="\n".join(texts)))
        for i, message in enumerate(request.messages):
            field = f"messages[{i}]"
            content, role = message.content, message.role
            if role == "assistant":
                out.append(self._assistant(content, field))
            elif role == "system":
                out.append(self._system(content, f"{field}.content"))
            elif role != "user":
                self.problem(f"{field}.role", f"{role!r} messages are {_NATIVE_ONLY}")
            elif isinstance(content, str):
                out.append(ChatMessage(role="user", content=content))
            else:
                out += self._user(content, f"{field}.content")
        return out

    def _system(self, content: str | list[dict[str, Any]], field: str) -> ChatMessage:
        """Mid-conversation instructions: a system message where they stand."""
        text = content if isinstance(content, str) else "\n".join(self._texts(content, field))
        return ChatMessage(role="system", content=text)

    def _texts(self, blocks: list[dict[str, Any]], field: str) -> list[str]:
        texts: list[str] = []
        for j, block in enumerate(blocks):
            if not isinstance(block, dict):
                raise _invalid(f"{field}[{j}]", "expected an object")
            if block.get("type") == "text":
                texts.append(_text(block, f"{field}[{j}]"))
            else:
                self.problem(
                    f"{field}[{j}].type", f"{block.get('type')!r} blocks are {_NATIVE_ONLY}"
                )
        return texts

    def _user(self, blocks: list[dict[str, Any]], field: str) -> list[ChatMessage]:
        """Tool results first (each a tool message), then the user message of the rest, with
        mid-conversation system blocks as system messages where they stand. A turn of which
        nothing could be said is an empty user message (the call has problems then)."""
        results: list[ChatMessage] = []
        turn: list[ChatMessage] = []
        parts: list[dict[str, Any]] = []
        for j, block in enumerate(blocks):
            kind, at = block.get("type"), f"{field}[{j}]"
            if kind == "text":
                parts.append({"type": "text", "text": _text(block, at)})
            elif kind == "image":
                image = self._image(block.get("source"), f"{at}.source")
                if image is not None:
                    parts.append({"type": "image_url", "image_url": {"url": image}})
            elif kind == "tool_result":
                results.append(self._tool_result(block, at))
            elif kind == "document":
                part = self._document(block, at)
                if part is not None:
                    parts.append(part)
            elif kind == "search_result":
                parts.append({"type": "text", "text": self._search_result(block, at)})
            elif kind == "mid_conv_system":
                if parts:
                    turn.append(ChatMessage(role="user", content=parts))
                    parts = []
                turn.append(self._system(_blocks(block, at), f"{at}.content"))
            else:
                self.problem(f"{at}.type", f"{kind!r} blocks are {_NATIVE_ONLY}")
        if parts:
            turn.append(ChatMessage(role="user", content=parts))
        elif not results and not turn:
            turn.append(ChatMessage(role="user", content=""))
        return results + turn

    def _document(self, block: dict[str, Any], field: str) -> dict[str, Any] | None:
        """A text or content document as text (its title and context first), a base64 PDF
        as a file part; other sources (URL, file id) are problems."""
        source = block.get("source")
        if not isinstance(source, dict):
            raise _invalid(f"{field}.source", "expected an object")
        kind = source.get("type")
        head = [v for v in (block.get("title"), block.get("context")) if isinstance(v, str) and v]
        if kind == "text" and isinstance(source.get("data"), str):
            return {"type": "text", "text": "\n\n".join([*head, source["data"]])}
        if kind == "content":
            inner = source.get("content")
            texts = (
                [inner]
                if isinstance(inner, str)
                else self._texts(_blocks(source, f"{field}.source"), f"{field}.source.content")
            )
            return {"type": "text", "text": "\n\n".join([*head, *texts])}
        data = source.get("data")
        if kind == "base64" and source.get("media_type") == "application/pdf" and data:
            name = head[0] if head else "document.pdf"
            file = {"filename": name, "file_data": f"data:application/pdf;base64,{data}"}
            return {"type": "file", "file": file}
        self.problem(f"{field}.source.type", f"{kind!r} document sources are {_NATIVE_ONLY}")
        return None

    def _search_result(self, block: dict[str, Any], field: str) -> str:
        head = [v for v in (block.get("title"), block.get("source")) if isinstance(v, str) and v]
        texts = self._texts(_blocks(block, field), f"{field}.content")
        return "\n\n".join(["\n".join(head), *texts]) if head else "\n\n".join(texts)

    def _image(self, source: object, field: str) -> str | None:
        if not isinstance(source, dict):
            raise _invalid(field, "expected an object")
        kind = source.get("type")
        if kind == "base64":
            media_type, data = source.get("media_type"), source.get("data")
            if not isinstance(media_type, str) or not isinstance(data, str):
                raise _invalid(field, "a base64 source needs media_type and data strings")
            return f"data:{media_type};base64,{data}"
        if kind == "url" and isinstance(source.get("url"), str):
            return str(source["url"])
        self.problem(f"{field}.type", f"{kind!r} image sources are {_NATIVE_ONLY}")
        return None

    def _tool_result(self, block: dict[str, Any], field: str) -> ChatMessage:
        tool_use_id = block.get("tool_use_id")
        if not isinstance(tool_use_id, str) or not tool_use_id:
            raise _invalid(f"{field}.tool_use_id", "this field is required")
        content = block.get("content", "")
        if isinstance(content, list):
            content = "\n".join(self._texts(content, f"{field}.content"))
        elif not isinstance(content, str):
            raise _invalid(f"{field}.content", "expected a string or an array of blocks")
        return ChatMessage(role="tool", tool_call_id=tool_use_id, content=content)

    def _assistant(self, content: str | list[dict[str, Any]], field: str) -> ChatMessage:
        message = ChatMessage(role="assistant")
        if isinstance(content, str):
            message.content = content
            return message
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        signed: list[dict[str, Any]] = []
        for j, block in enumerate(content):
            kind, at = block.get("type"), f"{field}.content[{j}]"
            if kind == "text":
                texts.append(_text(block, at))
            elif kind == "tool_use":
                calls.append(_tool_call(block, at))
            elif kind in ("thinking", "redacted_thinking"):
                signed.append(block)
            else:
                self.problem(f"{at}.type", f"{kind!r} blocks are {_NATIVE_ONLY}")
        message.content = "".join(texts) if texts or not calls else None
        if calls:
            message.tool_calls = calls
        if signed:
            message.thinking_blocks = signed
        return message

    def tools(self, tools: list[dict[str, Any]]) -> list[ToolDefinition]:
        out: list[ToolDefinition] = []
        for i, tool in enumerate(tools):
            kind, name = tool.get("type", "custom"), tool.get("name")
            if kind != "custom":  # Anthropic's own tools (the unpriced ones are refused)
                self.problem(f"tools[{i}].type", f"{kind!r} tools are {_NATIVE_ONLY}")
                continue
            if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
                raise _invalid(f"tools[{i}].name", f"must match {FUNCTION_NAME_PATTERN}")
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                raise _invalid(f"tools[{i}].input_schema", "this field is required")
            function = FunctionDefinition(name=name, parameters=schema)
            description = tool.get("description")
            if isinstance(description, str) and description:
                function.description = description
            if isinstance(tool.get("strict"), bool):
                function.strict = tool["strict"]
            out.append(ToolDefinition(type="function", function=function))
        return out

    def tool_choice(self, chat: ChatRequest, choice: dict[str, Any]) -> None:
        kind = choice.get("type")
        names = {tool.function.name for tool in chat.tools} if chat.tools is not UNSET else set()
        if kind == "auto":
            chat.tool_choice = "auto"
        elif kind == "none":
            chat.tool_choice = "none"
        elif kind == "any":
            chat.tool_choice = "required" if names else "auto"
        elif kind == "tool":
            name = choice.get("name")
            if not isinstance(name, str) or name not in names:
                raise _invalid("tool_choice.name", f"no tool named {name!r}")
            chat.tool_choice = {"type": "function", "function": {"name": name}}
        else:
            raise _invalid("tool_choice.type", "must be one of: auto, any, tool, none")
        if choice.get("disable_parallel_tool_use") is True and names:
            chat.parallel_tool_calls = False


def _text(block: dict[str, Any], field: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise _invalid(f"{field}.text", "expected a string")
    return text


def _blocks(block: dict[str, Any], field: str) -> list[dict[str, Any]]:
    """A block's `content`: a list of blocks (a string is one text block)."""
    content = block.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _invalid(f"{field}.content", "expected a string or an array of blocks")
    return content


def _tool_call(block: dict[str, Any], field: str) -> dict[str, Any]:
    call_id, name = block.get("id"), block.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise _invalid(field, "a tool_use block needs id and name strings")
    arguments = block.get("input", {})
    function = {"name": name, "arguments": _encode(arguments).decode()}
    return {"id": call_id, "type": "function", "function": function}
