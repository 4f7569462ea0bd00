"""The SQLite store's task area: prepaid tasks, their queue and their leases, in the file.

Tasks are durable (a restart finds them, and their workers' leases run out), so every change is
one `BEGIN IMMEDIATE` transaction through `SqliteStore._write`. What `create_task` reads from
memory (the API key's requests bucket, the tenant's chat holds) is read and updated with no
`await` in between, like `admit`; the bucket takes the request only once the transaction
committed. A task row keeps the whole `TaskRecord` as msgpack beside the columns lookups
select on; the queue is two partial indexes (queued by seq, running by lease expiry).

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

from gateway.store import buckets
from gateway.store.ledger_ids import debit_id, refund_id
from gateway.store.sqlite import ops
from gateway.store.sqlite.memory import FENCE_SECONDS, Memory
from gateway.store.tasks import (
    TERMINAL,
    WORKER_LOST,
    TaskAbandon,
    TaskConfirm,
    TaskCreate,
    TaskCreateOutcome,
    TaskCreateResult,
    TaskFinal,
    TaskProgress,
    TaskRecord,
    TerminalStatus,
    worker_lost_error,
)

__all__ = ["SqliteTaskArea"]

_T = TypeVar("_T")

_POLL_SECONDS = 0.2
"""How often a waiting claim looks again for leases that ran out."""

_UNCONFIRMED = "unconfirmed"
"""The `status` column of a task not confirmed yet (its record reads `queued`): the queue's
index only sees `queued` rows, so no worker can claim it."""

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(TaskRecord)

_CLAIMABLE = (
    "SELECT EXISTS (SELECT 1 FROM tasks WHERE status = 'queued')"
    " OR EXISTS (SELECT 1 FROM tasks WHERE status = 'running' AND lease_until <= ?)"
)


class SqliteTaskArea:
    """The task operations of `SqliteStore` (a mixin: the store has the connection, the
    ephemeral memory and the clock)."""

    _clock: Callable[[], float]
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
                lambda conn, _now: _create(conn, c, held, self._clock())
            )
            # Committed: now the request is taken (a failed transaction took nothing).
            r -= 1 if c.limits.requests_per_minute > 0 else 0
            mem.store_levels(c.api_key_id, c.limits, r, t, now)
            if outcome is TaskCreateOutcome.CREATED and task is not None and task.price_units:
                mem.hold(c.tenant, c.task_id, task.price_units, now + c.hold_seconds)
        rate = buckets.state(c.limits, r, t, 0, limited)
        return TaskCreateResult(outcome=outcome, rate=rate, task=task, available_units=available)

    async def confirm_task(self, confirm: TaskConfirm) -> TaskRecord | None:
        await self._may_write()
        tenant, task_id = confirm.tenant, confirm.task_id
        task, confirmed = self._write(lambda conn, now: _confirm(conn, tenant, task_id, now))
        if confirmed:  # committed: the debit replaces the hold
            self._mem.unhold(tenant, task_id)
            self._wake_claimers()
        return task

    async def abandon_task(self, abandon: TaskAbandon) -> None:
        await self._may_write()
        mem, tenant, task_id = self._mem, abandon.tenant, abandon.task_id
        mem.fenced[task_id] = self._clock() + FENCE_SECONDS
        if self._write(lambda conn, _now: _abandon(conn, abandon)):
            mem.unhold(tenant, task_id)

    async def abandon_unconfirmed(self, *, older_than: float, limit: int = 100) -> int:
        before = self._clock() - older_than
        rows = self._rows(  # (the literal lets SQLite use the partial index)
            "SELECT record FROM tasks WHERE status = 'unconfirmed' ORDER BY seq LIMIT ?", (limit,)
        )
        stale = [t for t in (_decoder.decode(row[0]) for row in rows) if t.created_at <= before]
        for task in stale:  # (their idempotency rows are found by task id: no scope needed)
            await self.abandon_task(TaskAbandon(tenant=task.tenant, task_id=task.task_id))
        return len(stale)

    async def get_task(self, tenant: str, task_id: str) -> TaskRecord | None:
        task = self._read(lambda conn: _load(conn, task_id))
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
        task_id: str,
        worker_id: str,
        *,
        lease_seconds: float,
        progress: TaskProgress | None = None,
        input: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        def body(conn: sqlite3.Connection, _now: float) -> TaskRecord | None:
            task = _load(conn, task_id)
            if task is None or task.status != "running" or task.worker_id != worker_id:
                return task  # lost (or never held): the worker sees it and stops
            changes: dict[str, Any] = {"lease_until": self._clock() + lease_seconds}
            if progress is not None:
                changes["progress"] = progress
            if input is not None:
                changes["input"] = input
            return _save(conn, msgspec.structs.replace(task, **changes))

        await self._may_write()
        return self._write(body)

    async def request_cancel(self, tenant: str, task_id: str) -> TaskRecord | None:
        def body(conn: sqlite3.Connection, _now: float) -> tuple[TaskRecord | None, bool]:
            task, unconfirmed = _load_row(conn, task_id)
            if task is None or task.tenant != tenant:
                return None, False
            now = self._clock()
            if task.status == "queued":
                # Unconfirmed, it was never charged: its price goes (and its hold, below).
                price = 0 if unconfirmed else task.price_units
                task = msgspec.structs.replace(task, cancel_requested_at=now, price_units=price)
                return _finish(conn, task, now, "canceled", price, "canceled"), unconfirmed
            if task.status == "running" and task.cancel_requested_at is None:
                return _save(conn, msgspec.structs.replace(task, cancel_requested_at=now)), False
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
            task, unconfirmed = _load_row(conn, f.task_id)
            if task is None:
                raise KeyError(f.task_id)
            if unconfirmed:  # never charged nor claimed: nothing to end
                raise ValueError(f"task {f.task_id!r} was never confirmed")
            if task.status in TERMINAL:
                return task  # finalized before: nothing changes, whatever `final` says
            if f.refund_units > task.price_units:
                raise ValueError(f"refund {f.refund_units} exceeds the price {task.price_units}")
            return _finish(
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
            lambda conn, _now: _claim(conn, worker_id, lease_seconds, max_attempts, self._clock())
        )

    def _task_wake_event(self) -> asyncio.Event:
        if self._task_wake is None:
            self._task_wake = asyncio.Event()
        return self._task_wake

    def _wake_claimers(self) -> None:
        wake, self._task_wake = self._task_wake, None
        if wake is not None:
            wake.set()


# Transaction bodies (each runs inside one BEGIN IMMEDIATE) ---------------------------------


def _load(conn: sqlite3.Connection, task_id: str) -> TaskRecord | None:
    row = conn.execute("SELECT record FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    return _decoder.decode(row[0]) if row is not None else None


def _load_row(conn: sqlite3.Connection, task_id: str) -> tuple[TaskRecord | None, bool]:
    """The task and whether it is still unconfirmed."""
    row = conn.execute("SELECT record, status FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    if row is None:
        return None, False
    return _decoder.decode(row[0]), row[1] == _UNCONFIRMED


def _save(conn: sqlite3.Connection, task: TaskRecord) -> TaskRecord:
    conn.execute(
        "UPDATE tasks SET status = ?, lease_until = ?, completed_at = ?, record = ?"
        " WHERE task_id = ?",
        (task.status, task.lease_until, task.completed_at, _encoder.encode(task), task.task_id),
    )
    return task


def _create(
    conn: sqlite3.Connection, c: TaskCreate, held: int, now: float
) -> tuple[TaskCreateOutcome, TaskRecord | None, int]:
    """The durable part of `Store.create_task`: (outcome, task, available units)."""
    available = ops.balance(conn, c.tenant) - held
    claim = c.idempotency
    if claim is not None:
        row = conn.execute(
            "SELECT fingerprint, call_id FROM idempotency WHERE scope = ? AND expires_at > ?",
            (claim.scope, now),
        ).fetchone()
        if row is not None:
            if row[0] != claim.fingerprint:
                return TaskCreateOutcome.KEY_REUSED, None, available
            task, unconfirmed = _load_row(conn, row[1])
            if unconfirmed:
                return TaskCreateOutcome.IN_PROGRESS, None, available
            if task is not None:
                return TaskCreateOutcome.REPLAY, task, available
    task, unconfirmed = _load_row(conn, c.task_id)
    if task is not None:  # the same create again: nothing twice
        if task.tenant != c.tenant:
            raise ValueError(f"task id {c.task_id!r} belongs to another tenant")
        outcome = TaskCreateOutcome.CREATED if unconfirmed else TaskCreateOutcome.REPLAY
        return outcome, task, available
    if c.price_units > 0 and c.price_units > available:
        return TaskCreateOutcome.INSUFFICIENT_CREDITS, None, available

    task = TaskRecord(
        task_id=c.task_id,
        tenant=c.tenant,
        api_key_id=c.api_key_id,
        request_id=c.request_id,
        capability=c.capability,
        model=c.model,
        resolved_model=c.resolved_model,
        status="queued",
        input=c.input,
        metadata=c.metadata,
        price_units=c.price_units,
        progress=TaskProgress(),
        created_at=now,
    )
    conn.execute(
        "INSERT INTO tasks (task_id, tenant, status, capability, record) VALUES (?, ?, ?, ?, ?)",
        (c.task_id, c.tenant, _UNCONFIRMED, c.capability, _encoder.encode(task)),
    )
    if claim is not None:  # complete at once: a duplicate is IN_PROGRESS, then a REPLAY
        conn.execute(
            "INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, NULL, ?)",
            (claim.scope, claim.fingerprint, c.task_id, now + c.reply_ttl_seconds),
        )
    return TaskCreateOutcome.CREATED, task, available


def _confirm(
    conn: sqlite3.Connection, tenant: str, task_id: str, now: float
) -> tuple[TaskRecord | None, bool]:
    """The debit (the ledger's unique (tenant, id) makes it apply once) and the queue: (the task,
    whether this confirmed it)."""
    task, unconfirmed = _load_row(conn, task_id)
    if task is None or task.tenant != tenant:
        return None, False
    if not unconfirmed:
        return task, False
    if task.price_units > 0:
        ops.append_entry(
            conn,
            tenant,
            debit_id(task_id),
            "debit",
            -task.price_units,
            now,
            reason=f"{task.capability} {task.resolved_model}",
            task_id=task_id,
            request_id=task.request_id,
            model=task.resolved_model,
        )
    conn.execute("UPDATE tasks SET status = 'queued' WHERE task_id = ?", (task_id,))
    return task, True


def _abandon(conn: sqlite3.Connection, abandon: TaskAbandon) -> bool:
    """Remove an unconfirmed task with its idempotency row; True when there was one."""
    task, unconfirmed = _load_row(conn, abandon.task_id)
    if task is None or task.tenant != abandon.tenant or not unconfirmed:
        return False
    conn.execute("DELETE FROM tasks WHERE task_id = ?", (abandon.task_id,))
    if abandon.idempotency_scope:
        conn.execute(
            "DELETE FROM idempotency WHERE scope = ? AND call_id = ?",
            (abandon.idempotency_scope, abandon.task_id),
        )
    else:  # (the sweep of a dead gateway's creates: rare, a scan is fine)
        conn.execute("DELETE FROM idempotency WHERE call_id = ?", (abandon.task_id,))
    return True


def _claim(
    conn: sqlite3.Connection, worker_id: str, lease_seconds: float, max_attempts: int, now: float
) -> TaskRecord | None:
    """Leases that ran out first, then the oldest queued task; out of attempts: failed."""
    while True:
        row = (
            conn.execute(
                "SELECT record FROM tasks WHERE status = 'running' AND lease_until <= ?"
                " ORDER BY lease_until LIMIT 1",
                (now,),
            ).fetchone()
            or conn.execute(
                "SELECT record FROM tasks WHERE status = 'queued' ORDER BY seq LIMIT 1"
            ).fetchone()
        )
        if row is None:
            return None
        task: TaskRecord = _decoder.decode(row[0])
        if task.attempts >= max_attempts:
            error = worker_lost_error()
            _finish(conn, task, now, "failed", task.price_units, WORKER_LOST, error=error)
            continue
        return _save(
            conn,
            msgspec.structs.replace(
                task,
                status="running",
                started_at=task.started_at if task.started_at is not None else now,
                worker_id=worker_id,
                lease_until=now + lease_seconds,
                attempts=task.attempts + 1,
                progress=msgspec.structs.replace(task.progress, stage="running"),
            ),
        )


def _finish(
    conn: sqlite3.Connection,
    task: TaskRecord,
    now: float,
    status: TerminalStatus,
    refund: int,
    reason: str,
    **changes: Any,
) -> TaskRecord:
    """Make a (non-terminal) task terminal and refund `refund` units, once per task."""
    percent = 100.0 if status == "succeeded" else task.progress.percent
    done = msgspec.structs.replace(
        task,
        status=status,
        completed_at=now,
        progress=msgspec.structs.replace(task.progress, percent=percent, stage=status),
        refunded_units=refund,
        **changes,
    )
    if refund > 0:
        ops.append_entry(
            conn,
            task.tenant,
            refund_id(task.task_id),
            "refund",
            refund,
            now,
            reason=reason,
            task_id=task.task_id,
            model=task.resolved_model,
        )
    return _save(conn, done)
