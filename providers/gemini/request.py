"""The gateway's OpenAI chat body -> a Gemini `GenerateContentRequest` (a dict to encode).

Messages: system/developer -> `systemInstruction`; user -> "user", assistant -> "model",
tool/function results -> "user" `functionResponse` parts; consecutive turns of one role are
merged (Gemini wants parallel function responses in one turn). Tools, tool_choice and the
sampling fields map one to one (`generation_config`); what Gemini cannot honour is either
dropped when it is only a hint, or rejected (UpstreamRejectedRequest) when silently ignoring
it would give the caller something else than asked for. docs/providers.md has the table.
"""

from __future__ import annotations

import base64
import mimetypes
from typing import Any
from urllib.parse import unquote_to_bytes

import msgspec

from providers.errors import UpstreamRejectedRequest
from providers.gemini.schema import gemini_schema

__all__ = ["SKIP_SIGNATURE", "gemini_request"]

# Google's documented stand-in for a thought signature the history no longer has (a tool
# call made by another model, or by a client that dropped `extra_content`).
SKIP_SIGNATURE = "skip_thought_signature_validator"
_OLD_MODELS = ("gemini-1", "gemini-2", "gemma")  # they neither need nor expect one
# Models that only work in thinking mode: Gemini answers a budget of 0 with a 400.
_ALWAYS_THINKING = ("gemini-2.5-pro", "gemini-3-pro", "gemini-3.1-pro")
_TOOL_MODES = {"none": "NONE", "auto": "AUTO", "required": "ANY"}
_THINKING_BUDGETS = {
    "none": 0,
    "minimal": 512,
    "low": 1024,
    "medium": 8192,
    "high": 24576,
    "xhigh": 24576,
}
_SAMPLING = (
    ("temperature", "temperature"),
    ("top_p", "topP"),
    ("max_completion_tokens", "maxOutputTokens"),
    ("n", "candidateCount"),
    ("seed", "seed"),
    ("presence_penalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
    ("top_logprobs", "logprobs"),
)


def gemini_request(
    body: dict[str, Any],
    *,
    include_thoughts: bool = False,
    safety_settings: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """The request for `body`; UpstreamRejectedRequest for what Gemini cannot express."""
    if body.get("web_search_options") is not None:
        raise _reject("web_search_options is not supported by this upstream")
    if "audio" in (body.get("modalities") or ()) or body.get("audio") is not None:
        raise _reject("audio output is not supported by this upstream")
    model = str(body.get("model", ""))
    name = model.removeprefix("models/")
    current = not name.startswith(_OLD_MODELS)
    if body.get("reasoning_effort") == "none" and name.startswith(_ALWAYS_THINKING):
        raise _reject(
            f"reasoning_effort: {name} cannot turn thinking off; use 'minimal' for the least"
        )
    system, contents = _contents(body.get("messages") or [], current)
    request: dict[str, Any] = {"contents": contents}
    if system:
        request["systemInstruction"] = {"parts": system}
    tools = body.get("tools")
    if tools:
        request["tools"] = [{"functionDeclarations": [_declaration(t) for t in tools]}]
    tool_config = _tool_config(body.get("tool_choice"))
    if tool_config:
        request["toolConfig"] = tool_config
    config = _generation_config(body, include_thoughts)
    if config:
        request["generationConfig"] = config
    if safety_settings:
        request["safetySettings"] = safety_settings
    return request


def _generation_config(body: dict[str, Any], include_thoughts: bool = False) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for name, gemini_name in _SAMPLING:
        value = body.get(name)
        if value is not None:
            config[gemini_name] = value
    if body.get("top_k") is not None:  # a client's extension field (`providers.base`)
        config["topK"] = body["top_k"]
    stop = body.get("stop")
    if stop:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    if body.get("logprobs"):
        config["responseLogprobs"] = True
    response_format = body.get("response_format") or {}
    kind = response_format.get("type")
    if kind in ("json_object", "json_schema"):
        config["responseMimeType"] = "application/json"
        schema = (response_format.get("json_schema") or {}).get("schema")
        if kind == "json_schema" and isinstance(schema, dict):
            converted = gemini_schema(schema)
            if converted.get("properties") or converted.get("type", "object") != "object":
                config["responseSchema"] = converted
    thinking: dict[str, Any] = {}
    effort = body.get("reasoning_effort")
    if effort in _THINKING_BUDGETS:
        thinking["thinkingBudget"] = _THINKING_BUDGETS[effort]
    if include_thoughts and thinking.get("thinkingBudget") != 0:
        thinking["includeThoughts"] = True
    if thinking:
        config["thinkingConfig"] = thinking
    return config


def _contents(
    messages: list[dict[str, Any]], current: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(systemInstruction parts, contents). `current`: a model that takes thought signatures
    and call ids (not gemini-1*, gemini-2*, gemma*)."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool_call id -> function name, for the tool results
    for index, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            text = _text_of(content, index)
            if text:
                system.append({"text": text})
            continue
        if role == "user":
            turn, parts = "user", _parts(content, index)
        elif role == "assistant":
            turn, parts = "model", _assistant_parts(message, index, names, current)
        elif role == "tool":
            call_id = message.get("tool_call_id")
            name = names.get(call_id) if isinstance(call_id, str) else None
            name = name or message.get("name")
            if not name:
                raise _reject(
                    f"messages[{index}]: tool_call_id {call_id!r} matches no earlier tool call"
                )
            response = _function_response(name, content, index)
            if current and isinstance(call_id, str) and call_id:
                response["functionResponse"]["id"] = call_id
            turn, parts = "user", [response]
        elif role == "function":
            name = message.get("name") or "function"
            turn, parts = "user", [_function_response(name, content, index)]
        else:
            raise _reject(f"messages[{index}]: role {role!r} is not supported by this upstream")
        if not parts:
            continue
        if contents and contents[-1]["role"] == turn:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": turn, "parts": parts})
    return system, contents


def _parts(content: object, index: int) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for position, part in enumerate(content if isinstance(content, list) else ()):
        kind = part.get("type")
        where = f"messages[{index}].content[{position}]"
        if kind in ("text", "refusal"):
            text = part.get(kind)
            if text:
                parts.append({"text": text})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            parts.append(_media(url, where, None))
        elif kind == "input_audio":
            audio = part.get("input_audio") or {}
            fmt = audio.get("format") or "wav"
            parts.append({"inlineData": {"mimeType": f"audio/{fmt}", "data": audio.get("data")}})
        elif kind == "file":
            file = part.get("file") or {}
            if not file.get("file_data"):
                raise _reject(f"{where}: only inline file_data is supported, not file_id")
            parts.append(_media(file["file_data"], where, file.get("filename")))
        else:
            raise _reject(f"{where}: part type {kind!r} is not supported by this upstream")
    return parts


def _media(url: object, where: str, filename: str | None) -> dict[str, Any]:
    """A data: URL inline (`inlineData`); an http(s) or gs:// URL by reference (`fileData`)."""
    if not isinstance(url, str) or not url:
        raise _reject(f"{where}: a URL is required")
    if url.startswith("data:"):
        header, comma, payload = url[5:].partition(",")
        if not comma:
            raise _reject(f"{where}: malformed data: URL")
        if not header.endswith(";base64"):
            payload = base64.b64encode(unquote_to_bytes(payload)).decode()
        mime = header.split(";", 1)[0] or _guess(filename) or "application/octet-stream"
        return {"inlineData": {"mimeType": mime, "data": payload}}
    if url.startswith(("https://", "http://", "gs://")):
        file_data = {"fileUri": url}
        guessed = _guess(filename or url.split("?", 1)[0])
        if guessed:
            file_data["mimeType"] = guessed
        return {"fileData": file_data}
    raise _reject(f"{where}: only data:, http(s):// and gs:// URLs are supported")


def _guess(name: str | None) -> str | None:
    return mimetypes.guess_type(name)[0] if name else None


def _assistant_parts(
    message: dict[str, Any], index: int, names: dict[str, str], current: bool
) -> list[dict[str, Any]]:
    """Text parts, then one `functionCall` per tool call with its id and thought signature
    (Google's stand-in for the first call when the client dropped it); a text answer's
    signature (`extra_content.google.thought_signature` of the message) goes back on its
    last text part."""
    parts = _parts(message.get("content"), index)
    calls = list(message.get("tool_calls") or ())
    if not calls and parts and current:
        signature = _signature_of(message)
        if signature:
            parts[-1]["thoughtSignature"] = signature
    legacy = message.get("function_call")
    if legacy:
        calls.append({"id": None, "function": legacy})
    for position, call in enumerate(calls):
        function = call.get("function") or {}
        name = function.get("name")
        if not name:
            raise _reject(f"messages[{index}].tool_calls[{position}]: function.name is required")
        call_id = call.get("id")
        function_call: dict[str, Any] = {"name": name, "args": _arguments(function)}
        if isinstance(call_id, str):
            names[call_id] = name
            if current and call_id:
                function_call["id"] = call_id
        part: dict[str, Any] = {"functionCall": function_call}
        signature = _signature_of(call)
        if signature:
            part["thoughtSignature"] = signature
        elif position == 0 and current:
            part["thoughtSignature"] = SKIP_SIGNATURE
        parts.append(part)
    return parts


def _signature_of(item: dict[str, Any]) -> str | None:
    """`extra_content.google.thought_signature` of a message or a tool call, if a string."""
    extra = item.get("extra_content")
    google = extra.get("google") if isinstance(extra, dict) else None
    signature = google.get("thought_signature") if isinstance(google, dict) else None
    return signature if isinstance(signature, str) and signature else None


def _arguments(function: dict[str, Any]) -> dict[str, Any]:
    raw = function.get("arguments") or "{}"
    try:
        args = msgspec.json.decode(raw) if isinstance(raw, (str, bytes)) else raw
    except msgspec.DecodeError:
        args = None
    if not isinstance(args, dict):
        raise _reject(f"the arguments of tool call {function.get('name')!r} are not a JSON object")
    return args


def _function_response(name: str, content: object, index: int) -> dict[str, Any]:
    return {"functionResponse": {"name": name, "response": {"content": _text_of(content, index)}}}


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


def _declaration(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or {}
    declaration: dict[str, Any] = {"name": function.get("name")}
    if function.get("description"):
        declaration["description"] = function["description"]
    parameters = function.get("parameters")
    if isinstance(parameters, dict):
        schema = gemini_schema(parameters)
        # Gemini refuses an OBJECT without properties: a function without arguments omits it.
        if schema.get("properties") or schema.get("type", "object") != "object":
            declaration["parameters"] = schema
    return declaration


def _tool_config(choice: object) -> dict[str, Any] | None:
    if isinstance(choice, str) and choice in _TOOL_MODES:
        return {"functionCallingConfig": {"mode": _TOOL_MODES[choice]}}
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        if name:
            return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
    return None


def _reject(message: str) -> UpstreamRejectedRequest:
    return UpstreamRejectedRequest(message)
