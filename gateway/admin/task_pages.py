"""Recent tasks of every tenant, newest first, in pages.

Each tenant's tasks are a list of their own in the store, newest first; a page merges the
next `limit` of each and keeps the newest `limit` overall. Its cursor says, per tenant, the
last task the pages so far took from it, so the next page goes on from there in every tenant
at once, at the cost of one store page per tenant, as the first page.
"""

from __future__ import annotations

import base64
import binascii
import json

from gateway.admin.paging import Page
from gateway.admin.service import TASK_STATUSES, invalid, require_tenant
from gateway.config.loader import GatewayConfig
from gateway.store.base import Store, TaskRecord

__all__ = ["task_page"]


async def task_page(
    store: Store,
    config: GatewayConfig,
    *,
    tenant: str | None,
    status: str | None,
    limit: int,
    after: str | None,
) -> Page[TaskRecord]:
    """The `limit` newest tasks after the cursor `after` (a `next_after`), one tenant's or
    every declared tenant's."""
    if not 1 <= limit <= 200:
        raise invalid("limit", "an integer from 1 to 200")
    if status is not None and status not in TASK_STATUSES:
        raise invalid("status", f"one of {', '.join(TASK_STATUSES)}")
    if tenant is not None:
        require_tenant(config, tenant)
    names = [tenant] if tenant is not None else sorted(config.tenants)
    positions = _decode(after) if after is not None else {}
    found: list[TaskRecord] = []
    more_in_store = False
    for name in names:
        page = await store.list_tasks(name, limit=limit, after=positions.get(name), status=status)
        found.extend(page.tasks)
        more_in_store = more_in_store or page.has_more
    found.sort(key=lambda task: (task.created_at, task.task_id), reverse=True)
    taken = found[:limit]
    has_more = len(found) > limit or more_in_store
    if not has_more:
        return Page(items=taken, has_more=False, next_after=None)
    for task in taken:  # oldest last: the last one taken per tenant is where it goes on
        positions[task.tenant] = task.task_id
    return Page(items=taken, has_more=True, next_after=_encode(positions))


def _encode(positions: dict[str, str]) -> str:
    raw = json.dumps(positions, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str) -> dict[str, str]:
    try:
        positions = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        positions = None
    if not isinstance(positions, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in positions.items()
    ):
        raise invalid("after", "a next_after value from a previous page")
    return positions
