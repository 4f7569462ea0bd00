"""Pages of the admin API's lists: `limit` items after a cursor, and whether more follow.

The admin lists (tenants, keys, usage rows) are built whole in a known order; a page is the
`limit` items after the one whose cursor is `after`, the way the ledger pages by entry id. An
unknown cursor gives an empty page, as the store's own paging does.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Page", "page_of", "row_cursor"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    has_more: bool
    next_after: str | None
    """The cursor of the page's last item when more follow (the next page's `after`)."""


def page_of(
    items: Sequence[T], *, limit: int, after: str | None, cursor: Callable[[T], str]
) -> Page[T]:
    start = 0
    if after is not None:
        found = next((i for i, item in enumerate(items) if cursor(item) == after), None)
        if found is None:
            return Page(items=[], has_more=False, next_after=None)
        start = found + 1
    chunk = list(items[start : start + limit])
    has_more = start + limit < len(items)
    return Page(items=chunk, has_more=has_more, next_after=cursor(chunk[-1]) if has_more else None)


def row_cursor(*parts: str) -> str:
    """An opaque, URL-safe cursor for an item named by several strings (a usage row)."""
    raw = json.dumps(list(parts), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
