"""Builders for the task listing tests: tasks made through the store API, and every listing of
a filter combination read page by page."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from gateway.store.base import RateLimits, Store, TaskCreate, TaskCreateOutcome, TaskRecord
from tests.store.support import create_confirmed

__all__ = ["CAPABILITIES", "STATUSES", "all_pages", "make_task", "make_tasks", "task_create"]

STATUSES: tuple[Any, ...] = ("queued", "running", "succeeded", "failed", "canceled")
CAPABILITIES = ("text_to_image", "text_to_music", "image_to_image")


def task_create(task_id: str, tenant: str, capability: str) -> TaskCreate:
    return TaskCreate(
        task_id=task_id,
        tenant=tenant,
        api_key_id="k1",
        request_id=f"req_{task_id}",
        limits=RateLimits(requests_per_minute=0),  # no requests limit: many tasks at once
        capability=capability,
        model="auto",
        resolved_model="image-model-2",
        price_units=0,
        input={"prompt": "a red fox"},
        metadata={},
    )


async def make_task(
    store: Store, task_id: str, *, tenant: str = "t1", capability: str = "text_to_image"
) -> TaskRecord:
    """A queued task (free: no grant needed), created and confirmed as the service does."""
    result = await create_confirmed(store, task_create(task_id, tenant, capability))
    assert result.outcome is TaskCreateOutcome.CREATED and result.task is not None
    return result.task


async def make_tasks(
    store: Store, specs: Iterable[tuple[str, str]], *, tenant: str = "t1", at_once: int = 100
) -> None:
    """Tasks (id, capability), `at_once` created concurrently: for volume, not order (within a
    batch their order of creation is not defined)."""
    pending = list(specs)
    for start in range(0, len(pending), at_once):
        batch = pending[start : start + at_once]
        await asyncio.gather(
            *(make_task(store, task_id, tenant=tenant, capability=cap) for task_id, cap in batch)
        )


async def all_pages(
    store: Store, tenant: str, *, limit: int, **filters: Any
) -> list[tuple[list[str], bool]]:
    """Every page of one listing, following `after` to the end: (ids, has_more) per page."""
    pages: list[tuple[list[str], bool]] = []
    after: str | None = None
    while True:
        page = await store.list_tasks(tenant, limit=limit, after=after, **filters)
        pages.append(([t.task_id for t in page.tasks], page.has_more))
        if not page.has_more:
            return pages
        assert page.tasks, "has_more with an empty page"
        after = page.tasks[-1].task_id
        assert len(pages) < 10_000, "paging does not end"
