"""The store's value types for stored Responses API responses (the store area that only the
Responses dialect uses: `previous_response_id`, `GET /v1/responses/{id}` and its input items).

A response is kept per tenant, whole: the `response` object as it was answered (JSON), and
the input items it was made from (the earlier turns rebuilt from `previous_response_id`, then
the items the client sent, each with its id). Continuing from it needs nothing else: the next
turn's earlier items are its input items followed by its output. Listing the input items is a
page of that list, cut here the same way for every backend (`page_items`).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "RESPONSE_RETENTION_SECONDS",
    "ItemOrder",
    "ItemsPage",
    "StoredResponse",
    "page_items",
]

RESPONSE_RETENTION_SECONDS = 30 * 86_400.0
"""How long a stored response is kept (OpenAI keeps them 30 days too)."""

ItemOrder = Literal["asc", "desc"]


class StoredResponse(msgspec.Struct, kw_only=True, frozen=True):
    response_id: str
    tenant: str
    response: bytes
    """The `response` object as its client got it (JSON: output and usage included)."""
    input_items: list[dict[str, Any]]
    """The earlier turns' items, then the client's, in order; each has an `id`."""
    created_at: float
    expires_at: float


class ItemsPage(msgspec.Struct, kw_only=True, frozen=True):
    data: list[dict[str, Any]]
    has_more: bool


def page_items(
    items: list[dict[str, Any]], *, limit: int, after: str | None, order: ItemOrder
) -> ItemsPage:
    """Up to `limit` items in `order` (`asc`: as given), starting after the item whose id is
    `after` (an id not among them gives an empty page)."""
    ordered = items if order == "asc" else items[::-1]
    start = 0
    if after is not None:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            return ItemsPage(data=[], has_more=False)
        start = ids.index(after) + 1
    page = ordered[start : start + limit]
    return ItemsPage(data=page, has_more=start + limit < len(ordered))
