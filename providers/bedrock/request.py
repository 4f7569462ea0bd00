"""The gateway's OpenAI chat body -> a Bedrock `Converse` request (a dict to encode).

Messages: system/developer -> `system` text blocks; user and assistant -> turns of content
blocks, consecutive turns of one role merged (Converse wants them to alternate); tool results
-> `toolResult` blocks in a user turn. Tools, tool_choice and the sampling fields map one to
one; `reasoning_effort` becomes the model family's own switch (Claude's `thinking` budget,
Nova's `reasoningConfig`, `reasoning_effort` for OpenAI's open-weight models), and so does the
extension field `top_k` (`providers.base`: Claude's `top_k`, Nova's `inferenceConfig.topK`,
taken for those families only: `extension_fields_of`). What Converse
cannot honour is dropped when it is only a hint, and refused (UpstreamRejectedRequest) when
ignoring it would give the caller something else than asked. docs/providers.md has the table.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from providers.errors import UpstreamRejectedRequest

__all__ = ["converse_request", "extension_fields_of", "thinks"]

_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif"}
_FORMATS["image/webp"] = "webp"
_EXTENSIONS = {"png": "png", "jpg": "jpeg", "jpeg": "jpeg", "gif": "gif", "webp": "webp"}
_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
_NOVA_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}
_MIN_BUDGET = 1024
_CACHE_POINT = {"cachePoint": {"type": "default"}}
_EMPTY_SCHEMA = {"type": "object", "properties": {}}
_TOP_K = frozenset({"top_k"})


def _reject(message: str) -> UpstreamRejectedRequest:
    return UpstreamRejectedRequest(message)


def thinks(model: str) -> str | None:
    """The model's family of reasoning switch: "claude", "nova", "openai", or None."""
    name = model.rsplit("/", 1)[-1].lower()
    if "anthropic." in name or name.startswith("anthropic"):
        return "claude"
    if "amazon.nova" in name:
        return "nova"
    if "openai." in name:
        return "openai"
    return None


def extension_fields_of(model: str) -> frozenset[str]:
    """The extension fields translated for `model`: `top_k` for Claude and Nova models."""
    return _TOP_K if thinks(model) in ("claude", "nova") else frozenset()


def converse_request(body: dict[str, Any], *, cache_points: bool = False) -> dict[str, Any]:
    """The request for `body`; UpstreamRejectedRequest for what Converse cannot express."""
    _refuse_unsupported(body)
    model = str(body.get("model", ""))
    system, messages, has_tool_blocks = _messages(body.get("messages") or [])
    request: dict[str, Any] = {"messages": messages}
    if system:
        request["system"] = [*system, _CACHE_POINT] if cache_points else system
    config = _inference_config(body)
    if config:
        request["inferenceConfig"] = config
    tool_config = _tool_config(body, has_tool_blocks, cache_points)
    if tool_config is not None:
        request["toolConfig"] = tool_config
    additional: dict[str, Any] = {}
    effort = body.get("reasoning_effort")
    if effort is not None and effort != "none":
        fields = _reasoning(model, effort, config.get("maxTokens"), body.get("messages") or [])
        if fields:
            additional.update(fields)
    top_k = body.get("top_k")
    if top_k is not None:
        if thinks(model) == "nova":
            additional["inferenceConfig"] = {"topK": top_k}
        else:
            additional["top_k"] = top_k
    if additional:
        request["additionalModelRequestFields"] = additional
    return request


def _refuse_unsupported(body: dict[str, Any]) -> None:
    n = body.get("n")
    if isinstance(n, int) and n > 1:
        raise _reject("n: this upstream gives one choice per request")
    if body.get("audio") is not None or "audio" in (body.get("modalities") or ()):
        raise _reject("audio output is not supported by this upstream")
    if body.get("web_search_options") is not None:
        raise _reject("web_search_options is not supported by this upstream")
    kind = (body.get("response_format") or {}).get("type")
    if kind in ("json_object", "json_schema"):
        raise _reject(f"response_format {kind} is not supported by this upstream")


def _inference_config(body: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if limit is not None:
        config["maxTokens"] = limit
    for name, wire in (("temperature", "temperature"), ("top_p", "topP")):
        if body.get(name) is not None:
            config[wire] = body[name]
    stop = body.get("stop")
    if stop:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    return config


def _messages(
    messages: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """(system blocks, turns, whether any turn holds tool use or results)."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    tool_blocks = False
    for index, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            text = _text_of(content, index)
            if text:
                system.append({"text": text})
            continue
        if role == "user":
            turn, blocks = "user", _user_blocks(content, index)
        elif role == "assistant":
            turn, blocks = "assistant", _assistant_blocks(message, index)
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise _reject(f"messages[{index}]: a tool message needs its tool_call_id")
            result = {"toolUseId": call_id, "content": [{"text": _text_of(content, index)}]}
            turn, blocks = "user", [{"toolResult": result}]
        else:
            raise _reject(f"messages[{index}]: role {role!r} is not supported by this upstream")
        if not blocks:
            continue
        tool_blocks = tool_blocks or any("toolUse" in b or "toolResult" in b for b in blocks)
        if turns and turns[-1]["role"] == turn:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": turn, "content": blocks})
    return system, turns, tool_blocks


def _user_blocks(content: object, index: int) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for position, part in enumerate(content if isinstance(content, list) else ()):
        kind = part.get("type")
        where = f"messages[{index}].content[{position}]"
        if kind == "text":
            if part.get("text"):
                blocks.append({"text": part["text"]})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            blocks.append(_image(url, where))
        else:
            raise _reject(f"{where}: part type {kind!r} is not supported by this upstream")
    return blocks


def _image(url: object, where: str) -> dict[str, Any]:
    """A data: URL as bytes; an s3:// URL by location. Converse cannot fetch http(s)."""
    if not isinstance(url, str) or not url:
        raise _reject(f"{where}: an image URL is required")
    if url.startswith("data:"):
        header, comma, payload = url[5:].partition(",")
        mime = header.split(";", 1)[0].lower()
        if not comma or not header.endswith(";base64"):
            raise _reject(f"{where}: only base64 data: URLs are supported")
        image_format = _FORMATS.get(mime)
        if image_format is None:
            raise _reject(f"{where}: images must be PNG, JPEG, GIF or WebP, not {mime!r}")
        try:
            base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _reject(f"{where}: the image is not valid base64") from exc
        return {"image": {"format": image_format, "source": {"bytes": payload}}}
    if url.startswith("s3://"):
        extension = url.rsplit(".", 1)[-1].lower()
        image_format = _EXTENSIONS.get(extension)
        if image_format is None:
            raise _reject(f"{where}: cannot tell the image's format from {url!r}")
        return {"image": {"format": image_format, "source": {"s3Location": {"uri": url}}}}
    raise _reject(f"{where}: only data: and s3:// image URLs are supported by this upstream")


def _assistant_blocks(message: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """Signed reasoning first (`thinking_blocks`, as answered), text, then the tool calls."""
    blocks: list[dict[str, Any]] = []
    for block in message.get("thinking_blocks") or ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "thinking" and block.get("signature"):
            text = {"text": block.get("thinking") or "", "signature": block["signature"]}
            blocks.append({"reasoningContent": {"reasoningText": text}})
        elif block.get("type") == "redacted_thinking" and block.get("data"):
            blocks.append({"reasoningContent": {"redactedContent": block["data"]}})
    content = message.get("content")
    if isinstance(content, str):
        if content:
            blocks.append({"text": content})
    elif isinstance(content, list):
        for part in content:
            if part.get("type") in ("text", "refusal"):
                text = part.get(part["type"])
                if text:
                    blocks.append({"text": text})
    for position, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        name = function.get("name")
        call_id = call.get("id")
        if not name or not call_id:
            raise _reject(
                f"messages[{index}].tool_calls[{position}]: an id and function.name are required"
            )
        use = {"toolUseId": call_id, "name": name, "input": _arguments(function)}
        blocks.append({"toolUse": use})
    return blocks


def _arguments(function: dict[str, Any]) -> dict[str, Any]:
    raw = function.get("arguments") or "{}"
    try:
        args = msgspec.json.decode(raw) if isinstance(raw, (str, bytes)) else raw
    except msgspec.DecodeError:
        args = None
    if not isinstance(args, dict):
        raise _reject(f"the arguments of tool call {function.get('name')!r} are not a JSON object")
    return args


def _text_of(content: object, index: int) -> str:
    """The text of a system or tool message (a string, or text parts joined)."""
    if content is None or isinstance(content, str):
        return content or ""
    texts: list[str] = []
    for part in content if isinstance(content, list) else ():
        if part.get("type") != "text":
            raise _reject(f"messages[{index}]: only text parts are supported in this role")
        texts.append(part.get("text") or "")
    return "".join(texts)


def _tool_config(
    body: dict[str, Any], has_tool_blocks: bool, cache_points: bool
) -> dict[str, Any] | None:
    """Tools and the choice; `none` sends no tools, unless the history holds tool blocks
    (Converse then wants the tools declared), in which case the model may still call one."""
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    if not tools or (choice == "none" and not has_tool_blocks):
        return None
    specs = []
    for position, tool in enumerate(tools):
        if tool.get("type", "function") != "function":
            raise _reject(f"tools[{position}]: only function tools are supported")
        function = tool.get("function") or {}
        spec: dict[str, Any] = {"name": function.get("name")}
        if function.get("description"):
            spec["description"] = function["description"]
        parameters = function.get("parameters")
        spec["inputSchema"] = {
            "json": parameters if isinstance(parameters, dict) else _EMPTY_SCHEMA
        }
        specs.append({"toolSpec": spec})
    if cache_points:
        specs.append(_CACHE_POINT)
    config: dict[str, Any] = {"tools": specs}
    if choice == "required":
        config["toolChoice"] = {"any": {}}
    elif choice == "auto":
        config["toolChoice"] = {"auto": {}}
    elif isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        if name:
            config["toolChoice"] = {"tool": {"name": name}}
    return config


def _reasoning(
    model: str, effort: str, max_tokens: int | None, messages: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """`additionalModelRequestFields` that switch the model's reasoning on."""
    family = thinks(model)
    if family == "claude":
        if not _continued_turn_signed(messages):
            return None  # the client dropped the signed reasoning: this step goes without
        budget = _BUDGETS.get(effort, _BUDGETS["medium"])
        if max_tokens is not None:
            budget = min(budget, max_tokens - 1)
        if budget < _MIN_BUDGET:
            raise _reject(
                f"reasoning_effort needs max_completion_tokens above {_MIN_BUDGET} for this model"
            )
        return {"thinking": {"type": "enabled", "budget_tokens": budget}}
    if family == "nova":
        level = _NOVA_EFFORT.get(effort, "medium")
        return {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": level}}
    if family == "openai":
        return {"reasoning_effort": effort}
    raise _reject(f"reasoning_effort is not supported for model {model!r} on this upstream")


def _continued_turn_signed(messages: list[dict[str, Any]]) -> bool:
    """False when the assistant turn a request continues (after the last user message that
    is not only tool results) starts without its signed reasoning: Claude refuses thinking
    then, so the request goes without it (the model thinks again from the next user turn)."""
    last_user = -1
    for position, message in enumerate(messages):
        if message.get("role") == "user":
            last_user = position
    continued = [m for m in messages[last_user + 1 :] if m.get("role") == "assistant"]
    if not continued:
        return True
    blocks = continued[0].get("thinking_blocks") or ()
    return any(
        isinstance(b, dict) and (b.get("signature") or b.get("type") == "redacted_thinking")
        for b in blocks
    )
