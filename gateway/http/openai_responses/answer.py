"""Answers as OpenAI's Responses API gives them: a chat.completion translated into a
`response` object, and the pieces a stream builds the same object from.

    id                         resp_ + the call's random part (the log line's call id)
    reasoning_content          a reasoning item (its text as a reasoning_text part), first;
    thinking_blocks            signed ones in its `encrypted_content`, which the gateway
                               reads back when the client returns the item (Claude's
                               thinking kept across a tool loop)
    message.content            a message item with one output_text part
    message.refusal            a message item with a refusal part
    message.tool_calls         function_call items (call_id = the upstream's call id);
                               custom_tool_call items for custom tools (input = the
                               arguments' `input` string)
    finish_reason              length -> incomplete (max_output_tokens), content_filter ->
                               incomplete (content_filter), else completed
    usage                      input_tokens (cached included), input_tokens_details
                               {cached_tokens, cache_write_tokens}, output_tokens,
                               output_tokens_details.reasoning_tokens, total_tokens;
                               credits, credits_usd_reference
"""

from __future__ import annotations

import base64
import time
from typing import Any

import msgspec

from gateway.http.openai_responses.items import CUSTOM_INPUT, SIGNED_THINKING
from gateway.http.openai_responses.request import ToolNames
from gateway.ids import new_call_id

__all__ = [
    "custom_input",
    "response_id",
    "response_object",
    "response_of",
    "responses_usage",
    "status_of",
]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.decode
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def response_id(call_id: str) -> str:
    """The response's id for a call's id (`chatcmpl_<hex>` -> `resp_<hex>`)."""
    return "resp_" + call_id.rpartition("_")[2]


def item_id(prefix: str) -> str:
    return prefix + "_" + new_call_id().removeprefix("call_")


def status_of(finish_reason: object) -> tuple[str, dict[str, str] | None]:
    """The response's status and `incomplete_details` for a chat finish reason."""
    reason = _INCOMPLETE.get(finish_reason if isinstance(finish_reason, str) else "")
    return ("incomplete", {"reason": reason}) if reason else ("completed", None)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def responses_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat usage object (with the gateway's credits) in the Responses API's names."""
    prompt = usage.get("prompt_tokens_details")
    prompt = prompt if isinstance(prompt, dict) else {}
    completion = usage.get("completion_tokens_details")
    completion = completion if isinstance(completion, dict) else {}
    input_tokens = _count(usage.get("prompt_tokens"))
    output_tokens = _count(usage.get("completion_tokens"))
    out: dict[str, Any] = {
        "input_tokens": input_tokens,
        "input_tokens_details": {
            "cached_tokens": _count(prompt.get("cached_tokens")),
            "cache_write_tokens": _count(prompt.get("cache_creation_tokens")),
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": _count(completion.get("reasoning_tokens"))},
        "total_tokens": _count(usage.get("total_tokens")) or input_tokens + output_tokens,
    }
    for name in ("credits", "credits_usd_reference"):
        if name in usage:
            out[name] = usage[name]
    return out


def custom_input(arguments: str) -> str:
    """A custom tool's input from the JSON arguments it was called with as a function."""
    try:
        value = _decode(arguments) if arguments else {}
    except msgspec.DecodeError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get(CUSTOM_INPUT), str):
        return str(value[CUSTOM_INPUT])
    return arguments


def signed_thinking(blocks: list[dict[str, Any]]) -> str:
    """The `encrypted_content` that carries an upstream's signed thinking blocks back to it
    (`gateway.http.openai_responses.request.SIGNED_THINKING`)."""
    return SIGNED_THINKING + base64.urlsafe_b64encode(_encode(blocks)).decode()


def reasoning_item(
    text: str, status: str, signed: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id("rs"),
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": status,
    }
    if signed:
        item["encrypted_content"] = signed_thinking(signed)
    return item


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(parts: list[dict[str, Any]], status: str, ident: str = "") -> dict[str, Any]:
    return {
        "id": ident or item_id("msg"),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": parts,
    }


def call_item(
    call_id: str, name: str, arguments: str, names: ToolNames, *, status: str
) -> dict[str, Any]:
    """The item of a call of the function offered as `name`: a function_call, or a
    custom_tool_call for a custom tool; a namespaced tool's call names its namespace."""
    custom = name in names.custom
    namespace = None
    if name in names.namespaced:
        namespace, name = names.namespaced[name]
    item: dict[str, Any]
    if custom:
        item = {
            "id": item_id("ctc"),
            "type": "custom_tool_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "input": custom_input(arguments) if status == "completed" else "",
        }
    else:
        item = {
            "id": item_id("fc"),
            "type": "function_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
        }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def response_object(
    ident: str,
    model: str,
    echo: dict[str, Any],
    *,
    status: str,
    output: list[dict[str, Any]],
    created_at: int,
    usage: dict[str, Any] | None = None,
    incomplete: dict[str, str] | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `response` object, as the answer and every response.* event carries it."""
    return {
        "id": ident,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete,
        "model": model,
        "output": output,
        **echo,
        "usage": usage,
    }


def response_of(completion: dict[str, Any], echo: dict[str, Any], names: ToolNames) -> bytes:
    """A finished chat.completion (one choice, the gateway's id, model and credits) as the
    client's `response` object."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content")
    signed = message.get("thinking_blocks")
    signed = [b for b in signed if isinstance(b, dict)] if isinstance(signed, list) else []
    if not isinstance(reasoning, str) or not reasoning:
        reasoning = "".join(str(b.get("thinking") or "") for b in signed)
    if reasoning or signed:
        output.append(reasoning_item(reasoning, "completed", signed))
    parts: list[dict[str, Any]] = []
    text = message.get("content")
    if isinstance(text, str) and text:
        parts.append(text_part(text))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append({"type": "refusal", "refusal": refusal})
    if parts:
        output.append(message_item(parts, "completed"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        name = str(function.get("name") or "")
        arguments = function.get("arguments")
        output.append(
            call_item(
                str(call.get("id") or item_id("call")),
                name,
                arguments if isinstance(arguments, str) else "",
                names,
                status="completed",
            )
        )
    status, incomplete = status_of(choice.get("finish_reason"))
    created = completion.get("created")
    body = response_object(
        response_id(str(completion.get("id") or "")),
        str(completion.get("model") or ""),
        echo,
        status=status,
        output=output,
        created_at=created if isinstance(created, int) else int(time.time()),
        usage=responses_usage(completion.get("usage") or {}),
        incomplete=incomplete,
    )
    return _encode(body)
