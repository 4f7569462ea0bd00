"""What a Messages request carries that its bytes do not bound (`gateway.chat.inputs`), and
the limits the gateway puts on what an Anthropic upstream would otherwise run without one.

    image blocks           base64: by the size its header gives; url: the upstream's cap
    document blocks        base64 PDF: by its pages; text and content sources: their bytes
                           (images in them as images); a url source is fetched by the
                           gateway before this (`documents`); one left, or a file source:
                           400 naming it (the gateway cannot see what the upstream would read)
    tool_result content    as message content
    typed tools            the tokens their definition adds (`TYPED_TOOL_TOKENS`)
    web_fetch              `max_uses` lowered to `SERVER_TOOL_MAX_USES`, `max_content_tokens`
                           to `SERVER_TOOL_MAX_CONTENT_TOKENS` (set when absent): each use one
                           more round that bills the context again
    tool_search_tool       rounds as web_fetch's, adding only definitions already sent
    mcp_servers, container 400 naming them: what remote servers answer, and containers
                           billed by the hour, have no bound

Server tools billed beyond tokens are refused before this (`gateway.http.anthropic.request`).
The body is changed in place: what the upstream is sent is what the hold covers.
"""

from __future__ import annotations

from typing import Any

from gateway.chat.inputs import InputInventory, pages_of
from gateway.chat.media_size import image_size
from gateway.errors import ErrorDetail, InvalidRequest, fields_message
from providers.anthropic.inputs import TYPED_TOOL_TOKENS

__all__ = ["SERVER_TOOL_MAX_CONTENT_TOKENS", "SERVER_TOOL_MAX_USES", "bound_messages"]

SERVER_TOOL_MAX_USES = 3
SERVER_TOOL_MAX_CONTENT_TOKENS = 10_000
_UNBOUNDED_FIELDS = {
    "mcp_servers": "runs remote MCP servers whose answers the hold cannot bound",
    "container": "runs a container billed by the hour, which this gateway does not charge",
}
_LOOPS = ("web_fetch_", "tool_search_tool_")
_CAP_BYTES = 64
"""What setting the two caps may add to the body's bytes."""


def _refuse(field: str, message: str) -> InvalidRequest:
    detail = ErrorDetail(field=field, message=message)
    return InvalidRequest(fields_message([detail]), details=[detail])


def bound_messages(raw: dict[str, Any]) -> InputInventory:
    """The inventory of a decoded Messages body (its blocks already checked to be typed
    objects), with its server tools capped in place; a 400 naming what cannot be bounded."""
    for name, reason in _UNBOUNDED_FIELDS.items():
        if raw.get(name) is not None:
            raise _refuse(name, reason)
    inputs = InputInventory()
    for index, message in enumerate(raw.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            _blocks(inputs, content, f"messages[{index}].content")
    tools = raw.get("tools")
    if isinstance(tools, list) and tools:
        inputs.tools = True
        for index, tool in enumerate(tools):
            if isinstance(tool, dict):
                _tool(inputs, tool, f"tools[{index}]")
    return inputs


def _blocks(inputs: InputInventory, blocks: list[Any], field: str) -> None:
    for position, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        at = f"{field}[{position}]"
        if kind == "image":
            inputs.images.append(_image(block.get("source"), f"{at}.source"))
        elif kind == "document":
            _document(inputs, block.get("source"), f"{at}.source")
        elif kind == "tool_result" and isinstance(block.get("content"), list):
            _blocks(inputs, block["content"], f"{at}.content")


def _image(source: object, field: str) -> tuple[int, int] | None:
    if not isinstance(source, dict):
        return None
    kind = source.get("type")
    if kind == "file":
        raise _refuse(f"{field}.type", "'file' sources are not taken: send the image's bytes")
    data = source.get("data")
    if kind == "base64" and isinstance(data, str):
        return image_size(data)
    return None


def _document(inputs: InputInventory, source: object, field: str) -> None:
    if not isinstance(source, dict):
        return
    kind = source.get("type")
    if kind == "base64":
        data = source.get("data")
        media_type = str(source.get("media_type", "")).lower()
        if not isinstance(data, str):
            return
        if media_type == "application/pdf":
            inputs.pdf_pages += pages_of(data, 0, f"{field}.data")
        elif media_type.startswith("image/"):
            inputs.images.append(image_size(data))
        return
    if kind == "content" and isinstance(source.get("content"), list):
        _blocks(inputs, source["content"], f"{field}.content")
        return
    if kind in ("url", "file"):
        raise _refuse(
            f"{field}.type",
            f"{kind!r} document sources are not taken: send the document's bytes "
            "(base64), so what it costs is known before the call",
        )


def _tool(inputs: InputInventory, tool: dict[str, Any], field: str) -> None:
    kind = tool.get("type")
    if not isinstance(kind, str) or kind == "custom":
        return
    for prefix, tokens in TYPED_TOOL_TOKENS:
        if kind.startswith(prefix):
            inputs.extra_prompt_tokens += tokens
            break
    if not kind.startswith(_LOOPS):
        return
    if kind.startswith("web_fetch_"):
        uses = _capped(tool, "max_uses", SERVER_TOOL_MAX_USES)
        limit = _capped(tool, "max_content_tokens", SERVER_TOOL_MAX_CONTENT_TOKENS)
        inputs.server_tool_content_tokens += uses * limit
        inputs.extra_prompt_tokens += _CAP_BYTES
    else:
        uses = SERVER_TOOL_MAX_USES
    inputs.server_tool_uses += uses


def _capped(tool: dict[str, Any], name: str, cap: int) -> int:
    """`tool[name]` set to `cap` when absent or above it (a lower value is the client's own:
    kept, and what the hold counts)."""
    value = tool.get(name)
    if isinstance(value, int) and not isinstance(value, bool) and value <= cap:
        return max(value, 0)
    tool[name] = cap
    return cap
