"""OpenAI chat-completions request -> Anthropic Messages request.

What has no Anthropic equivalent is either dropped (a sampling or storage hint whose absence
leaves the answer valid) or rejected with `UpstreamRejectedRequest` naming the field (the caller
asked for something the answer would silently lack). The choices, also in docs/providers.md:

    lifted      system/developer messages -> `system` (joined by blank lines, wherever they were)
    merged      consecutive same-role turns (tool results are user turns): Anthropic alternates
    clamped     temperature to 0..1 (Anthropic's range; OpenAI's is 0..2)
    extension   `top_k` (a client's extension field, `providers.base`) -> `top_k`
    dropped     frequency_penalty, presence_penalty, seed, logit_bias, logprobs, top_logprobs,
                store, service_tier, prompt_cache_key, prediction, verbosity, stream_options,
                message `name`, assistant `reasoning_content`/`refusal`/`audio`, tool `strict`,
                image `detail`, response_format {type: text}, metadata other than the user id
    rejected    n > 1, audio output, response_format json_object/json_schema,
                web_search_options, role `function` and `function_call`, input_audio and file
                parts, non-function tools, tool arguments that are not a JSON object
    thinking    reasoning_effort and the signed blocks sent back: `providers.anthropic.thinking`
    cached      with a `cache_control` lifetime for the model, the system prompt and the tools
                are marked cacheable (the last system block and the last tool)
"""

from __future__ import annotations

from typing import Any

import msgspec

from providers.anthropic.thinking import (
    continues_unthought_turn,
    strip_thinking,
    thinking_blocks,
    thinking_config,
)
from providers.errors import UpstreamRejectedRequest

__all__ = ["cache_mark", "messages_request"]

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def cache_mark(ttl: str | None) -> dict[str, Any] | None:
    """The `cache_control` of a cache lifetime from the options ("5m", "1h"), None for none."""
    if ttl is None:
        return None
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def messages_request(
    body: dict[str, Any],
    *,
    default_max_tokens: int,
    stream: bool,
    cache: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `POST /messages` body; UpstreamRejectedRequest naming the field it cannot carry.
    `cache` (a `cache_mark`) marks the system prompt and the tools cacheable."""
    _reject_unsupported(body)
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens
    thinking = thinking_config(body, max_tokens)
    system, messages = _messages(body.get("messages") or [], thinking is not None)
    if thinking is not None and continues_unthought_turn(messages):
        thinking = None  # the client dropped the blocks the continued turn needs
        messages = strip_thinking(messages)
    out: dict[str, Any] = {"model": body.get("model"), "max_tokens": max_tokens}
    if system:
        if cache is None:
            out["system"] = system
        else:  # a breakpoint needs the block form
            out["system"] = [{"type": "text", "text": system, "cache_control": cache}]
    out["messages"] = messages
    if stream:
        out["stream"] = True
    temperature = body.get("temperature")
    if temperature is not None:
        out["temperature"] = min(max(float(temperature), 0.0), 1.0)
    if body.get("top_p") is not None:
        out["top_p"] = body["top_p"]
    if body.get("top_k") is not None:
        out["top_k"] = body["top_k"]
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    tools = body.get("tools")
    if tools:
        out["tools"] = [_tool(index, tool) for index, tool in enumerate(tools)]
        if cache is not None:
            out["tools"][-1]["cache_control"] = cache
        choice = _tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
        if choice is not None:
            out["tool_choice"] = choice
    user_id = _user_id(body)
    if user_id:
        out["metadata"] = {"user_id": user_id}
    if thinking is not None:
        out["thinking"] = thinking
    return out


def _reject(field: str, why: str) -> UpstreamRejectedRequest:
    return UpstreamRejectedRequest(f"{field}: {why}")


def _reject_unsupported(body: dict[str, Any]) -> None:
    n = body.get("n")
    if n is not None and n != 1:
        raise _reject("n", "Anthropic models answer with one choice; n must be 1")
    if body.get("audio") is not None or "audio" in (body.get("modalities") or ()):
        raise _reject("audio", "Anthropic models do not produce audio")
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type", "text") != "text":
        raise _reject(
            "response_format", "JSON mode is not supported by Anthropic upstreams; use a tool"
        )
    if body.get("web_search_options") is not None:
        raise _reject("web_search_options", "not supported by Anthropic upstreams")


def _messages(messages: list[dict[str, Any]], thinking: bool) -> tuple[str, list[dict[str, Any]]]:
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        field = f"messages[{i}]"
        if role in ("system", "developer"):
            system.append(_plain_text(message.get("content"), f"{field}.content"))
            continue
        if role == "user":
            blocks = _user_blocks(message.get("content"), field)
        elif role == "assistant":
            blocks = _assistant_blocks(message, field)
            if thinking:
                blocks[:0] = thinking_blocks(message)
        elif role == "tool":
            blocks, role = [_tool_result(message, field)], "user"
        else:
            raise _reject(f"{field}.role", f"{role!r} is not supported; use tool messages")
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(text for text in system if text), turns


def _plain_text(content: object, field: str) -> str:
    """A system message's text: a string, or its text parts joined."""
    if content is None or isinstance(content, str):
        return content or ""
    texts: list[str] = []
    for j, part in enumerate(content if isinstance(content, list) else ()):
        if part.get("type") != "text":
            raise _reject(f"{field}[{j}].type", "only text parts are allowed here")
        texts.append(part.get("text") or "")
    return "\n".join(texts)


def _user_blocks(content: object, field: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for j, part in enumerate(content if isinstance(content, list) else ()):
        kind = part.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": part.get("text") or ""})
        elif kind == "image_url":
            blocks.append(_image(part.get("image_url"), f"{field}.content[{j}].image_url"))
        else:
            raise _reject(f"{field}.content[{j}].type", f"{kind!r} parts are not supported")
    return blocks


def _image(value: object, field: str) -> dict[str, Any]:
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str):
        raise _reject(f"{field}.url", "must be a string")
    if url.startswith("data:"):
        header, _, data = url[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if encoding != "base64" or not data:
            raise _reject(f"{field}.url", "data URLs must be base64 (data:<type>;base64,...)")
        source = {"type": "base64", "media_type": media_type, "data": data}
        return {"type": "image", "source": source}
    if url.startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise _reject(f"{field}.url", "must be an https:// or a base64 data: URL")


def _assistant_blocks(message: dict[str, Any], field: str) -> list[dict[str, Any]]:
    if message.get("function_call") is not None:
        raise _reject(f"{field}.function_call", "not supported; use tool_calls")
    blocks: list[dict[str, Any]] = []
    content = message.get("content")
    if isinstance(content, str):
        if content:
            blocks.append({"type": "text", "text": content})
    elif isinstance(content, list):
        for part in content:  # text or refusal parts
            text = part.get("text") or part.get("refusal") or ""
            if text:
                blocks.append({"type": "text", "text": text})
    for j, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name"),
                "input": _arguments(
                    function.get("arguments"), f"{field}.tool_calls[{j}].function.arguments"
                ),
            }
        )
    return blocks


def _arguments(raw: object, field: str) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    try:
        value = msgspec.json.decode(raw) if isinstance(raw, str | bytes) else raw
    except msgspec.DecodeError:
        raise _reject(field, "is not valid JSON") from None
    if not isinstance(value, dict):
        raise _reject(field, "must be a JSON object")
    return value


def _tool_result(message: dict[str, Any], field: str) -> dict[str, Any]:
    tool_call_id = message.get("tool_call_id")
    if not tool_call_id:
        raise _reject(f"{field}.tool_call_id", "is required for tool messages")
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_call_id}
    text = _plain_text(message.get("content"), f"{field}.content")
    if text:
        block["content"] = text
    return block


def _tool(index: int, tool: dict[str, Any]) -> dict[str, Any]:
    if tool.get("type") != "function":
        raise _reject(f"tools[{index}].type", "only function tools are supported")
    function = tool.get("function") or {}
    out = {
        "name": function.get("name"),
        "input_schema": function.get("parameters") or _EMPTY_SCHEMA,
    }
    if function.get("description"):
        out["description"] = function["description"]
    return out


def _tool_choice(choice: object, parallel: object) -> dict[str, Any] | None:
    """none/auto/required/named -> none/auto/any/tool; parallel_tool_calls=false added."""
    if choice == "none":
        return {"type": "none"}
    if choice is None or choice == "auto":
        out: dict[str, Any] = {"type": "auto"}
    elif choice == "required":
        out = {"type": "any"}
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        out = {"type": "tool", "name": choice["function"].get("name")}
    else:
        raise _reject("tool_choice", "must be none, auto, required or a named function")
    if parallel is False:
        out["disable_parallel_tool_use"] = True
    elif choice is None:
        return None  # Anthropic's default is auto already
    return out


def _user_id(body: dict[str, Any]) -> str | None:
    metadata = body.get("metadata") or {}
    for value in (body.get("safety_identifier"), body.get("user"), metadata.get("user_id")):
        if value:
            return str(value)
    user = metadata.get("user")
    return str(user) if user else None
