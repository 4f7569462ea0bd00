"""The SQLite store's task area: prepaid tasks, their queue and their leases, in the file.

Tasks are durable (a restart finds them, and their workers' leases run out), so every change is
one `BEGIN IMMEDIATE` transaction through `SqliteStore._write`. What `create_task` reads from
memory (the API key's requests bucket, the tenant's chat holds) is read and updated with no
`await` in between, like `admit`; the bucket takes the request only once the transaction
committed. The statements of each transition are `task_rows.py`'s; the queue is two partial
indexes (queued by seq, running by lease expiry).

Task times come from the store's clock (`SqliteStore(clock=...)`), so tests move time to
expire a lease instead of sleeping. A waiting `claim_task` wakes at once when this process
creates a task, and otherwise looks again every `_POLL_SECONDS` (leases expire by time).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from gateway.clock import Clock
from gateway.store import buckets
from gateway.store.sqlite import ops
from gateway.store.sqlite import task_rows as rows
from gateway.store.sqlite.memory import FENCE_SECONDS, Memory
from gateway.store.tasks import (
    TERMINAL,
    TaskAbandon,
    TaskConfirm,
    TaskCreate,
    TaskCreateOutcome,
    TaskCreateResult,
    TaskFinal,
    TaskProgress,
    TaskRecord,
)

__all__ = ["SqliteTaskArea"]

_T = TypeVar("_T")

_POLL_SECONDS = 0.2
"""How often a waiting claim looks again for leases that ran out."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(TaskRecord)

_CLAIMABLE = (
    "SELECT EXISTS (SELECT 1 FROM tasks WHERE status = 'queued')"
    " OR EXISTS (SELECT 1 FROM tasks WHERE status = 'running' AND lease_until <= ?)"
)


class SqliteTaskArea:
    """The task operations of `SqliteStore` (a mixin: the store has the connection, the
    ephemeral memory and the clock)."""

    _clock: Clock
    _mem: Memory
    _task_wake: asyncio.Event | None = None
    """Set (and replaced) when this process enqueues a task: waiting claims look at once."""

    if TYPE_CHECKING:

        def _write(self, body: Callable[[sqlite3.Connection, float], _T]) -> _T: ...
        def _read(self, body: Callable[[sqlite3.Connection], _T]) -> _T: ...
        def _rows(self, sql: str, params: tuple[object, ...]) -> list[Any]: ...
        async def _may_write(self) -> None: ...

    async def create_task(self, create: TaskCreate) -> TaskCreateResult:
        await self._may_write()  # nothing awaits after this: the steps below are one
        c, mem = create, self._mem
        now = self._clock()
        r, t = mem.levels(c.api_key_id, c.limits, now)
        held = mem.held(c.tenant, now)
        limited = c.limits.requests_per_minute > 0 and r < 1
        if mem.fenced.get(c.task_id, 0.0) > now:
            outcome, task, available = TaskCreateOutcome.ABANDONED, None, 0
        elif limited:
            outcome, task = TaskCreateOutcome.RATE_LIMITED, None
            available = self._read(lambda conn: ops.balance(conn, c.tenant)) - held
        else:
            outcome, task, available = self._write(
                lambda conn, _now: rows.create(
                    conn, c, held, mem.key_held(c.api_key_id, now), self._clock()
                )
            )
            # Committed: now the request is taken (a failed transaction took nothing).
            r -= 1 if c.limits.requests_per_minute > 0 else 0
            mem.store_levels(c.api_key_id, c.limits, r, t, now)
            if outcome is TaskCreateOutcome.CREATED and task is not None and task.price_units:
                expires = now + c.hold_seconds
                mem.hold(c.tenant, c.task_id, task.price_units, expires, c.api_key_id)
                mem.last_used[c.api_key_id] = now
        rate = buckets.state(c.limits, r, t, 0, limited)
        return TaskCreateResult(outcome=outcome, rate=rate, task=task, available_units=available)

    async def confirm_task(self, confirm: TaskConfirm) -> TaskRecord | None:
        await self._may_write()
        tenant, task_id = confirm.tenant, confirm.task_id
        task, confirmed = self._write(lambda conn, now: rows.confirm(conn, tenant, task_id, now))
        if confirmed:  # committed: the debit replaces the hold
            self._mem.unhold(tenant, task_id)
            self._wake_claimers()
        return task

    async def abandon_task(self, abandon: TaskAbandon) -> None:
        await self._may_write()
        mem, tenant, task_id = self._mem, abandon.tenant, abandon.task_id
        mem.fenced[task_id] = self._clock() + FENCE_SECONDS
        if self._write(lambda conn, _now: rows.abandon(conn, abandon)):
            mem.unhold(tenant, task_id)

    async def abandon_unconfirmed(self, *, older_than: float, limit: int = 100) -> int:
        before = self._clock() - older_than
        found = self._rows(  # (the literal lets SQLite use the partial index)
            "SELECT record FROM tasks WHERE status = 'unconfirmed' ORDER BY seq LIMIT ?", (limit,)
        )
        unconfirmed = (rows.decoder.decode(row[0]) for row in found)
        stale = [task for task in unconfirmed if task.created_at <= before]
        for task in stale:  # (their idempotency rows are found by task id: no scope needed)
            await self.abandon_task(TaskAbandon(tenant=task.tenant, task_id=task.task_id))
        return len(stale)

    async def get_task(self, tenant: str, task_id: str) -> TaskRecord | None:
        task = self._read(lambda conn: rows.load(conn, task_id))
        return task if task is not None and task.tenant == tenant else None

    async def claim_task(
        self,
        worker_id: str,
        *,
        lease_seconds: float,
        wait_seconds: float = 0.0,
        max_attempts: int = 3,
    ) -> TaskRecord | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            wake = self._task_wake_event()  # taken before looking, so no enqueue is missed
            task = await self._claim_once(worker_id, lease_seconds, max_attempts)
            remaining = deadline - loop.time()
            if task is not None or remaining <= 0:
                return task
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, _POLL_SECONDS)):
                    await wake.wait()

    async def touch_task(
        self,
        tenant: str,
        task_id: str,
        worker_id: str,
        *,
        lease_seconds: float,
        progress: TaskProgress | None = None,
        input: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        def body(conn: sqlite3.Connection, _now: float) -> TaskRecord | None:
            task = rows.load(conn, task_id)
            if task is None or task.tenant != tenant:
                return None
            if task.status != "running" or task.worker_id != worker_id:
                return task  # lost (or never held): the worker sees it and stops
            changes: dict[str, Any] = {"lease_until": self._clock() + lease_seconds}
            if progress is not None:
                changes["progress"] = progress
            if input is not None:
                changes["input"] = input
            return rows.save(conn, msgspec.structs.replace(task, **changes))

        await self._may_write()
        return self._write(body)

    async def request_cancel(self, tenant: str, task_id: str) -> TaskRecord | None:
        def body(conn: sqlite3.Connection, _now: float) -> tuple[TaskRecord | None, bool]:
            task, unconfirmed = rows.load_row(conn, task_id)
            if task is None or task.tenant != tenant:
                return None, False
            now = self._clock()
            if task.status == "queued":
                # Unconfirmed, it was never charged: its price goes (and its hold, below).
                price = 0 if unconfirmed else task.price_units
                task = msgspec.structs.replace(task, cancel_requested_at=now, price_units=price)
                return rows.finish(conn, task, now, "canceled", price, "canceled"), unconfirmed
            if task.status == "running" and task.cancel_requested_at is None:
                return rows.save(
                    conn, msgspec.structs.replace(task, cancel_requested_at=now)
                ), False
            return task, False

        await self._may_write()
        task, unconfirmed = self._write(body)
        if unconfirmed:
            self._mem.unhold(tenant, task_id)
        return task

    async def finalize_task(self, final: TaskFinal) -> TaskRecord:
        f = final
        if f.refund_units < 0:
            raise ValueError("refund_units must not be negative")

        def body(conn: sqlite3.Connection, _now: float) -> TaskRecord:
            task, unconfirmed = rows.load_row(conn, f.task_id)
            if task is None or task.tenant != f.tenant:
                raise KeyError(f.task_id)
            if unconfirmed:  # never charged nor claimed: nothing to end
                raise ValueError(f"task {f.task_id!r} was never confirmed")
            if task.status in TERMINAL:
                return task  # finalized before: nothing changes, whatever `final` says
            if f.refund_units > task.price_units:
                raise ValueError(f"refund {f.refund_units} exceeds the price {task.price_units}")
            return rows.finish(
                conn, task, self._clock(), f.status, f.refund_units, f.reason,
                output=f.output, error=f.error, usage=f.usage, warnings=f.warnings,
            )  # fmt: skip

        await self._may_write()
        return self._write(body)

    async def task_queue_depth(self) -> int:
        rows = self._rows("SELECT count(*) FROM tasks WHERE status = 'queued'", ())
        return int(rows[0][0])

    # Claiming ------------------------------------------------------------------------------

    async def _claim_once(
        self, worker_id: str, lease_seconds: float, max_attempts: int
    ) -> TaskRecord | None:
        await self._may_write()
        now = self._clock()
        # A read first: an idle worker's polls take no write lock.
        if not self._read(lambda conn: conn.execute(_CLAIMABLE, (now,)).fetchone()[0]):
            return None
        return self._write(
            lambda conn, _now: rows.claim_next(
                conn, worker_id, lease_seconds, max_attempts, self._clock()
            )
        )

    def _task_wake_event(self) -> asyncio.Event:
        if self._task_wake is None:
            self._task_wake = asyncio.Event()
        return self._task_wake

    def _wake_claimers(self) -> None:
        wake, self._task_wake = self._task_wake, None
        if wake is not None:
            wake.set()
