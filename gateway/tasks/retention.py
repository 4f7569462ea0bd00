"""Task retention, the periodic part: a task that ended is removed `task_retention_days` later.

The store does the work (`Store.sweep_tasks`: SQLite deletes the rows, Redis removes the
listing entries of hashes that expired by TTL); this runs it from the gateway's once-a-minute
sweep in bounded rounds, after the one-time backfill of the listing indexes (Redis).
"""

from __future__ import annotations

from gateway.config.schema import GatewaySection
from gateway.logging import get_logger
from gateway.store.base import Store

__all__ = ["SWEEP_BATCH", "SWEEP_ROUNDS", "apply_task_retention", "sweep_tasks"]

SWEEP_BATCH = 500
"""Tasks one store call removes at most (one short transaction or pipeline)."""
SWEEP_ROUNDS = 20
"""Calls per sweep at most: 10,000 tasks a minute, far above what a gateway creates."""

_log = get_logger("gateway.tasks.retention")


def apply_task_retention(store: Store, section: GatewaySection) -> None:
    """The routing file's `task_retention_days`, for tasks that end from now on."""
    store.set_task_retention(float(section.task_retention_days) * 86_400)


async def sweep_tasks(store: Store) -> int:
    """The listing indexes backfilled (once per store), then up to `SWEEP_ROUNDS` bounded
    rounds of retention; returns how many tasks went."""
    indexed = await store.backfill_task_indexes()
    if indexed:
        _log.info("task_indexes_backfilled", tasks=indexed)
    removed = 0
    for _ in range(SWEEP_ROUNDS):
        count = await store.sweep_tasks(limit=SWEEP_BATCH)
        removed += count
        if count < SWEEP_BATCH:
            break
    if removed:
        _log.info("tasks_swept", removed=removed)
    return removed
