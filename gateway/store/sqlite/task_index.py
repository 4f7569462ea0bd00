"""The SQLite store's task listing and retention.

A listing is one statement on one index range, whatever the filters: the schema has an index
per combination, (tenant, seq), (tenant, status, seq), (tenant, capability, seq) and (tenant,
status, capability, seq), so a page reads `limit + 1` index entries and rows however many of
the tenant's tasks do not match (`listing_query`; a test checks its plans).

Retention: an ended task is deleted `set_task_retention` seconds after its `completed_at` (a
column set with the status, in the same statement), by bounded sweeps that read the partial
index of ended tasks oldest first; queued and running tasks are never in it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from gateway.clock import Clock
from gateway.store.tasks import TASK_RETENTION_SECONDS, TaskPage, TaskRecord, TaskStatus

__all__ = ["SqliteTaskIndexArea", "listing_query"]

_T = TypeVar("_T")

_decoder = msgspec.msgpack.Decoder(TaskRecord)


def listing_query(
    tenant: str,
    *,
    limit: int,
    after: str | None = None,
    status: TaskStatus | None = None,
    capability: str | None = None,
) -> tuple[str, tuple[object, ...]]:
    """The statement of one page (one more row than `limit`, for `has_more`) and its values."""
    sql, params = "SELECT record FROM tasks WHERE tenant = ?", [tenant]
    if status is not None:
        sql, params = sql + " AND status = ?", [*params, status]
    else:  # an unconfirmed task is found by its id only (a row filter: they are rare)
        sql += " AND status != 'unconfirmed'"
    if capability is not None:
        sql, params = sql + " AND capability = ?", [*params, capability]
    if after is not None:
        # An unknown `after` makes the bound NULL, so nothing matches: an empty page.
        sql += " AND seq < (SELECT seq FROM tasks WHERE task_id = ? AND tenant = ?)"
        params += [after, tenant]
    return sql + " ORDER BY seq DESC LIMIT ?", (*params, limit + 1)


class SqliteTaskIndexArea:
    """Listing and retention of `SqliteStore` (a mixin: the store has the connection and the
    clock)."""

    _clock: Clock
    _task_retention_seconds: float = TASK_RETENTION_SECONDS

    if TYPE_CHECKING:

        def _write(self, body: Callable[[sqlite3.Connection, float], _T]) -> _T: ...
        def _rows(self, sql: str, params: tuple[object, ...]) -> list[Any]: ...
        async def _may_write(self) -> None: ...

    async def list_tasks(
        self,
        tenant: str,
        *,
        limit: int,
        after: str | None = None,
        status: TaskStatus | None = None,
        capability: str | None = None,
    ) -> TaskPage:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        rows = self._rows(
            *listing_query(tenant, limit=limit, after=after, status=status, capability=capability)
        )
        return TaskPage(
            tasks=[_decoder.decode(r[0]) for r in rows[:limit]], has_more=len(rows) > limit
        )

    def set_task_retention(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("task retention must be positive")
        self._task_retention_seconds = seconds

    async def sweep_tasks(self, *, limit: int = 500) -> int:
        def body(conn: sqlite3.Connection, now: float) -> int:
            cursor = conn.execute(
                "DELETE FROM tasks WHERE seq IN (SELECT seq FROM tasks"
                " WHERE completed_at < ? ORDER BY completed_at LIMIT ?)",
                (now - self._task_retention_seconds, limit),
            )
            if cursor.rowcount:  # their callbacks' rows go too (a failed one's, mostly)
                conn.execute(
                    "DELETE FROM callbacks WHERE task_id NOT IN (SELECT task_id FROM tasks)"
                )
            return cursor.rowcount

        await self._may_write()
        return self._write(body)

    async def backfill_task_indexes(self) -> int:
        return 0  # the schema migration built the indexes and filled `completed_at`
