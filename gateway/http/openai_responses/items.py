"""The Responses API's input items -> the chat service's messages (see
`gateway.http.openai_responses.request` for the whole translation).

    message items                    by role; input_text / output_text / refusal -> text,
                                     input_image -> an image_url part (URL or data URL)
    function_call, custom_tool_call  the assistant message's tool_calls (consecutive calls
                                     join one message; a custom call's input is the
                                     arguments {"input": ...}; a namespaced call's name is
                                     `<namespace>__<name>`)
    function_call_output,            tool messages (text parts joined; images left out, as
    custom_tool_call_output          chat tool results carry text)
    reasoning items                  dropped (no translated upstream can read another's
                                     encrypted reasoning), but the gateway's own
                                     (`SIGNED_THINKING`): the next assistant message's
                                     thinking_blocks
    built-in tools' items            dropped
    item_reference, input files,     problems (only a passthrough route serves them)
    other types
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec
from msgspec import UNSET

from gateway.errors import ErrorDetail, InvalidRequest, fields_message
from gateway.schemas.chat import ChatMessage

__all__ = [
    "CUSTOM_INPUT",
    "NAMESPACE_JOIN",
    "NATIVE_ONLY",
    "SIGNED_THINKING",
    "STATEFUL",
    "InputItems",
    "invalid",
]

CUSTOM_INPUT = "input"
"""The one string argument a custom (freeform) tool takes when offered as a function."""
SIGNED_THINKING = "gw-thinking:"
"""Starts the `encrypted_content` of a reasoning item the gateway made from an upstream's
signed thinking blocks (their JSON, base64url): given back, they become the next assistant
message's `thinking_blocks`, so a model that signs its thinking (Claude) keeps it across a
tool loop. Any other encrypted content is another upstream's and is dropped."""
NAMESPACE_JOIN = "__"
"""Joins a namespace's name and its tool's into the one function name an upstream is offered."""
NATIVE_ONLY = "only served by OpenAI and Azure OpenAI upstreams (passed through as sent)"
STATEFUL = f"needs state kept by the upstream, so it is {NATIVE_ONLY}"
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

_encode = msgspec.json.Encoder().encode


def invalid(field_name: str, message: str) -> InvalidRequest:
    """A 400 naming one field."""
    detail = ErrorDetail(field=field_name, message=message)
    return InvalidRequest(fields_message([detail]), details=[detail])


class InputItems:
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
                raise invalid(at, "expected an object")
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
                self.problem(f"{at}.type", f"item_reference {STATEFUL}")
            else:
                self.problem(f"{at}.type", f"{kind!r} items are {NATIVE_ONLY}")
        return self.out

    def _message(self, item: dict[str, Any], at: str) -> None:
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise invalid(f"{at}.role", "must be one of: user, assistant, system, developer")
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
            raise invalid(f"{at}.content", "expected a string or an array of parts")
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
            raise invalid(at, "expected an object")
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            text = part.get("text")
            if not isinstance(text, str):
                raise invalid(f"{at}.text", "expected a string")
            return {"type": "text", "text": text}
        if kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str) or not url:
                raise invalid(f"{at}.image_url", "an image URL or data URL is required")
            image: dict[str, Any] = {"url": url}
            if part.get("detail") in ("low", "high", "auto"):
                image["detail"] = part["detail"]
            return {"type": "image_url", "image_url": image}
        self.problem(f"{at}.type", f"{kind!r} parts are {NATIVE_ONLY}")
        return None

    def _texts(self, parts: list[Any], at: str) -> list[str]:
        texts: list[str] = []
        for j, part in enumerate(parts):
            if not isinstance(part, dict):
                raise invalid(f"{at}[{j}]", "expected an object")
            kind = part.get("type")
            text = part.get("refusal") if kind == "refusal" else part.get("text")
            if kind not in (*_TEXT_PARTS, "refusal") or not isinstance(text, str):
                self.problem(f"{at}[{j}].type", f"{kind!r} parts are {NATIVE_ONLY}")
                continue
            texts.append(text)
        return texts

    def _call(self, item: dict[str, Any], kind: str, at: str) -> None:
        call_id, name = item.get("call_id"), item.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise invalid(at, f"a {kind} item needs call_id and name strings")
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
            raise invalid(f"{at}.call_id", "this field is required")
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
