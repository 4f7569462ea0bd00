"""The SQLite store's task rows: the statements of each task transition, each run inside the
one `BEGIN IMMEDIATE` transaction its caller (`tasks.py`) opens. A row keeps the whole
`TaskRecord` as msgpack beside the columns lookups select on; a task not confirmed yet has the
`status` column `unconfirmed` (its record reads `queued`), so the queue's index never sees it.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec

from gateway.store.ledger_ids import debit_id, refund_id
from gateway.store.sqlite import ops
from gateway.store.tasks import (
    WORKER_LOST,
    TaskAbandon,
    TaskCreate,
    TaskCreateOutcome,
    TaskProgress,
    TaskRecord,
    TerminalStatus,
    worker_lost_error,
)

__all__ = [
    "UNCONFIRMED",
    "abandon",
    "claim_next",
    "confirm",
    "create",
    "decoder",
    "finish",
    "load",
    "load_row",
    "save",
]

UNCONFIRMED = "unconfirmed"
"""The `status` column of a task not confirmed yet (its record reads `queued`): the queue's
index only sees `queued` rows, so no worker can claim it."""

_encoder = msgspec.msgpack.Encoder()
decoder = msgspec.msgpack.Decoder(TaskRecord)


def load(conn: sqlite3.Connection, task_id: str) -> TaskRecord | None:
    row = conn.execute("SELECT record FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    return decoder.decode(row[0]) if row is not None else None


def load_row(conn: sqlite3.Connection, task_id: str) -> tuple[TaskRecord | None, bool]:
    """The task and whether it is still unconfirmed."""
    row = conn.execute("SELECT record, status FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    if row is None:
        return None, False
    return decoder.decode(row[0]), row[1] == UNCONFIRMED


def save(conn: sqlite3.Connection, task: TaskRecord) -> TaskRecord:
    conn.execute(
        "UPDATE tasks SET status = ?, lease_until = ?, completed_at = ?, record = ?"
        " WHERE task_id = ?",
        (task.status, task.lease_until, task.completed_at, _encoder.encode(task), task.task_id),
    )
    return task


def create(
    conn: sqlite3.Connection, c: TaskCreate, held: int, key_held: int, now: float
) -> tuple[TaskCreateOutcome, TaskRecord | None, int]:
    """The durable part of `Store.create_task`: (outcome, task, available units). `key_held`:
    the key's active holds (counted against its budget, when it has one)."""
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
            task, unconfirmed = load_row(conn, row[1])
            if unconfirmed:
                return TaskCreateOutcome.IN_PROGRESS, None, available
            if task is not None:
                return TaskCreateOutcome.REPLAY, task, available
    task, unconfirmed = load_row(conn, c.task_id)
    if task is not None:  # the same create again: nothing twice
        if task.tenant != c.tenant:
            raise ValueError(f"task id {c.task_id!r} belongs to another tenant")
        outcome = TaskCreateOutcome.CREATED if unconfirmed else TaskCreateOutcome.REPLAY
        return outcome, task, available
    if c.price_units > 0 and c.price_units > available:
        return TaskCreateOutcome.INSUFFICIENT_CREDITS, None, available
    budget = c.budget
    if budget is not None and c.price_units > 0:
        spent = ops.key_spent(conn, c.api_key_id, budget.period, now)
        if c.price_units > budget.units - spent - key_held:
            return TaskCreateOutcome.KEY_BUDGET_EXCEEDED, None, available

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
        callback=c.callback,
    )
    conn.execute(
        "INSERT INTO tasks (task_id, tenant, status, capability, record) VALUES (?, ?, ?, ?, ?)",
        (c.task_id, c.tenant, UNCONFIRMED, c.capability, _encoder.encode(task)),
    )
    if claim is not None:  # complete at once: a duplicate is IN_PROGRESS, then a REPLAY
        conn.execute(
            "INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, NULL, ?)",
            (claim.scope, claim.fingerprint, c.task_id, now + c.reply_ttl_seconds),
        )
    return TaskCreateOutcome.CREATED, task, available


def confirm(
    conn: sqlite3.Connection, tenant: str, task_id: str, now: float
) -> tuple[TaskRecord | None, bool]:
    """The debit (the ledger's unique (tenant, id) makes it apply once) and the queue: (the task,
    whether this confirmed it)."""
    task, unconfirmed = load_row(conn, task_id)
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
            key_id=task.api_key_id,
        )
    conn.execute("UPDATE tasks SET status = 'queued' WHERE task_id = ?", (task_id,))
    return task, True


def abandon(conn: sqlite3.Connection, abandon: TaskAbandon) -> bool:
    """Remove an unconfirmed task with its idempotency row; True when there was one."""
    task, unconfirmed = load_row(conn, abandon.task_id)
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


def claim_next(
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
        task: TaskRecord = decoder.decode(row[0])
        if task.attempts >= max_attempts:
            error = worker_lost_error()
            finish(conn, task, now, "failed", task.price_units, WORKER_LOST, error=error)
            continue
        return save(
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


def finish(
    conn: sqlite3.Connection,
    task: TaskRecord,
    now: float,
    status: TerminalStatus,
    refund: int,
    reason: str,
    **changes: Any,
) -> TaskRecord:
    """Make a (non-terminal) task terminal and refund `refund` units, once per task; a task
    with a callback has its delivery scheduled, due now."""
    percent = 100.0 if status == "succeeded" else task.progress.percent
    done = msgspec.structs.replace(
        task,
        status=status,
        completed_at=now,
        progress=msgspec.structs.replace(task.progress, percent=percent, stage=status),
        refunded_units=refund,
        **changes,
    )
    if done.callback is not None:  # its delivery is scheduled in the same transaction
        done = msgspec.structs.replace(
            done,
            callback=msgspec.structs.replace(done.callback, status="pending", next_attempt_at=now),
        )
        conn.execute(
            "INSERT OR REPLACE INTO callbacks (task_id, tenant, state, due_at)"
            " VALUES (?, ?, 'due', ?)",
            (task.task_id, task.tenant, now),
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
            key_id=task.api_key_id,
        )
    return save(conn, done)
