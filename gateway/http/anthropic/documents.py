"""`document` blocks a Messages request names by URL, fetched by the gateway and sent as their
bytes: an upstream that fetched one itself would bill pages the hold never saw.

Each one (in the messages and in tool results) is fetched under the reference rules
(`gateway.artifacts.ArtifactService.fetch_document`: public https only, size-capped, sniffed
as a PDF; a 422 naming the block's `source.url` when refused), at most `MAX_FETCHED` a
request, all at once (the first refusal stops the others), and its source becomes `{type:
base64, media_type: application/pdf, data}` in place; the hold then counts its pages
(`gateway.http.anthropic.bounds`).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.errors import ErrorDetail, InvalidRequest, fields_message
from providers.all_or_none import all_or_none

__all__ = ["MAX_FETCHED", "FetchDocument", "fetch_url_documents"]

MAX_FETCHED = 4
FetchDocument = Callable[[str, str], Awaitable[bytes]]
"""(url, the field naming it) -> the document's bytes."""


async def fetch_url_documents(raw: dict[str, Any], fetch: FetchDocument) -> None:
    """Fetches the body's URL documents and puts their bytes in their place."""
    found: list[tuple[dict[str, Any], str, str]] = []
    for index, message in enumerate(raw.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            _collect(content, f"messages[{index}].content", found)
    if not found:
        return
    if len(found) > MAX_FETCHED:
        field = f"{found[MAX_FETCHED][2]}.url"
        detail = ErrorDetail(
            field=field, message=f"more than {MAX_FETCHED} documents by URL in one request"
        )
        raise InvalidRequest(fields_message([detail]), details=[detail])
    fetched = await all_or_none(fetch(url, f"{field}.url") for _, url, field in found)
    for (source, _, _), data in zip(found, fetched, strict=True):
        source.clear()
        source.update(
            type="base64", media_type="application/pdf", data=base64.b64encode(data).decode()
        )


def _collect(blocks: list[Any], field: str, found: list[tuple[dict[str, Any], str, str]]) -> None:
    for position, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        at = f"{field}[{position}]"
        source = block.get("source")
        if block.get("type") == "document" and isinstance(source, dict):
            url = source.get("url")
            if source.get("type") == "url" and isinstance(url, str):
                found.append((source, url, f"{at}.source"))
        elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
            _collect(block["content"], f"{at}.content", found)
