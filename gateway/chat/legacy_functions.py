"""OpenAI's legacy function calling (`functions`, `function_call`, role `function`) in the
shape of tools, so that adapters see one shape, and the answer back in the shape the client
asked in.

Request: `functions[i]` becomes `tools[i]` (`{type: "function", function: ...}`),
`function_call` becomes `tool_choice` (`"none"`, `"auto"`, `{name}` -> the named function); in
the history an assistant `function_call` becomes a one-call `tool_calls`, and a `function`
message the `tool` message answering it (`tool_call_id` of the latest call of that name).
Answer: a client that sent `functions` reads `message.function_call` (`delta.function_call`
in a stream) and `finish_reason: "function_call"`, as OpenAI answers it; only the first call of
a choice can be said that way.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from gateway.errors import ErrorDetail
from gateway.schemas.chat import ChatMessage, ChatRequest, ToolDefinition

__all__ = ["legacy_problems", "legacy_to_tools", "to_legacy_chunk", "to_legacy_completion"]

_CALL_ID = "call_legacy_{}"


def legacy_problems(request: ChatRequest, tool_names: set[str]) -> list[ErrorDetail]:
    """What is wrong with `functions` and `function_call` (besides the types): given beside
    their modern names, or naming a function that is not given."""
    out: list[ErrorDetail] = []
    if request.functions is not UNSET and request.tools is not UNSET:
        out.append(ErrorDetail(field="functions", message="send tools or functions, not both"))
    choice = request.function_call
    if choice is UNSET:
        return out
    if request.tool_choice is not UNSET:
        out.append(
            ErrorDetail(
                field="function_call", message="send tool_choice or function_call, not both"
            )
        )
    if isinstance(choice, str):
        if choice not in ("none", "auto"):
            out.append(ErrorDetail(field="function_call", message="must be none, auto or {name}"))
    elif not isinstance(choice.get("name"), str):
        out.append(ErrorDetail(field="function_call", message="must be none, auto or {name}"))
    elif choice["name"] not in tool_names:
        out.append(
            ErrorDetail(field="function_call.name", message=f"no function named {choice['name']!r}")
        )
    return out


def legacy_to_tools(request: ChatRequest) -> ChatRequest:
    """The request with its legacy function fields and messages said as tools."""
    changes: dict[str, Any] = {}
    if request.functions is not UNSET:
        changes["functions"] = UNSET
        changes["tools"] = [
            ToolDefinition(type="function", function=function) for function in request.functions
        ]
    choice = request.function_call
    if choice is not UNSET:
        changes["function_call"] = UNSET
        changes["tool_choice"] = (
            choice
            if isinstance(choice, str)
            else {"type": "function", "function": {"name": choice.get("name")}}
        )
    changes["messages"] = _messages(request.messages)
    return msgspec.structs.replace(request, **changes)


def _messages(messages: list[ChatMessage]) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    pending: dict[str, str] = {}  # function name -> id of its latest call
    for index, message in enumerate(messages):
        call = message.function_call
        if message.role == "assistant" and isinstance(call, dict):
            call_id = _CALL_ID.format(index)
            pending[str(call.get("name"))] = call_id
            function = {"name": call.get("name"), "arguments": call.get("arguments") or "{}"}
            tool_calls = [{"id": call_id, "type": "function", "function": function}]
            message = msgspec.structs.replace(message, function_call=UNSET, tool_calls=tool_calls)
        elif message.role == "function":
            name = message.name if message.name is not UNSET else ""
            message = ChatMessage(
                role="tool",
                content=message.content if message.content is not None else "",
                tool_call_id=pending.get(name, _CALL_ID.format(index)),
            )
        out.append(message)
    return out


def to_legacy_completion(body: dict[str, Any]) -> None:
    """A completion's tool calls as `function_call` (in place)."""
    for choice in body.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            continue
        calls = message.pop("tool_calls", None)
        if calls:
            function = calls[0].get("function") or {}
            message["function_call"] = {
                "name": function.get("name"),
                "arguments": function.get("arguments") or "",
            }
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "function_call"


def to_legacy_chunk(chunk: dict[str, Any]) -> None:
    """A stream chunk's tool-call deltas as `function_call` deltas (in place); pieces of any
    call but the first of a choice are dropped."""
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta")
        if isinstance(delta, dict):
            calls = delta.pop("tool_calls", None)
            if calls and (calls[0].get("index") or 0) == 0:
                function = calls[0].get("function") or {}
                delta["function_call"] = {
                    key: function[key] for key in ("name", "arguments") if key in function
                }
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "function_call"
