"""The SQLite store's task callbacks: the delivery schedule (`callbacks` rows beside the task,
whose record keeps the callback's state) and each tenant's signing secret.

A delivery is scheduled by `task_rows.finish`, in the transaction that ends its task. A claim
moves a due row to its lease's end and gives the callback a new lease token, in one
`BEGIN IMMEDIATE` transaction, so processes sharing the file never claim one twice; an attempt's
outcome applies only under that token.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from gateway.clock import Clock
from gateway.store.callbacks import CALLBACK_OPEN, CallbackAttempt, CallbackSecrets
from gateway.store.sqlite import task_rows as rows
from gateway.store.tasks import TERMINAL, TaskRecord

__all__ = ["SqliteCallbackArea"]

_T = TypeVar("_T")

_DUE = "SELECT EXISTS (SELECT 1 FROM callbacks WHERE state = 'due' AND due_at <= ?)"


class SqliteCallbackArea:
    """The callback operations of `SqliteStore` (a mixin: the store has the connection)."""

    _clock: Clock

    if TYPE_CHECKING:

        def _write(self, body: Callable[[sqlite3.Connection, float], _T]) -> _T: ...
        def _read(self, body: Callable[[sqlite3.Connection], _T]) -> _T: ...
        def _rows(self, sql: str, params: tuple[object, ...]) -> list[Any]: ...
        async def _may_write(self) -> None: ...

    async def ensure_callback_secret(self, tenant: str, secret: str) -> CallbackSecrets:
        found = await self.callback_secrets(tenant)
        if found is not None:
            return found

        def body(conn: sqlite3.Connection, _now: float) -> None:
            conn.execute(
                "INSERT OR IGNORE INTO callback_secrets (tenant, secret, created_at)"
                " VALUES (?, ?, ?)",
                (tenant, secret, self._clock()),
            )

        await self._may_write()
        self._write(body)
        made = await self.callback_secrets(tenant)
        assert made is not None
        return made

    async def rotate_callback_secret(
        self, tenant: str, secret: str, *, grace_seconds: float
    ) -> CallbackSecrets:
        def body(conn: sqlite3.Connection, _now: float) -> None:
            now = self._clock()
            row = conn.execute(
                "SELECT secret FROM callback_secrets WHERE tenant = ?", (tenant,)
            ).fetchone()
            previous, until = (row[0], now + grace_seconds) if row is not None else (None, None)
            conn.execute(
                "INSERT OR REPLACE INTO callback_secrets VALUES (?, ?, ?, ?, ?)",
                (tenant, secret, now, previous, until),
            )

        await self._may_write()
        self._write(body)
        made = await self.callback_secrets(tenant)
        assert made is not None
        return made

    async def callback_secrets(self, tenant: str) -> CallbackSecrets | None:
        found = self._rows(
            "SELECT secret, created_at, previous, previous_until FROM callback_secrets"
            " WHERE tenant = ?",
            (tenant,),
        )
        if not found:
            return None
        secret, created_at, previous, until = found[0]
        return CallbackSecrets(
            tenant=tenant,
            secret=secret,
            created_at=created_at,
            previous=previous,
            previous_until=until,
        )

    async def claim_callbacks(self, *, lease_seconds: float, limit: int) -> list[TaskRecord]:
        now = self._clock()
        # A read first: an idle delivery worker's polls take no write lock.
        if not self._read(lambda conn: conn.execute(_DUE, (now,)).fetchone()[0]):
            return []

        def body(conn: sqlite3.Connection, _now: float) -> list[TaskRecord]:
            now = self._clock()
            due = conn.execute(
                "SELECT task_id FROM callbacks WHERE state = 'due' AND due_at <= ?"
                " ORDER BY due_at LIMIT ?",
                (now, limit),
            ).fetchall()
            claimed = []
            for (task_id,) in due:
                task = rows.load(conn, task_id)
                if task is None or task.callback is None:  # removed by retention
                    conn.execute("DELETE FROM callbacks WHERE task_id = ?", (task_id,))
                    continue
                until = now + lease_seconds
                callback = msgspec.structs.replace(
                    task.callback, lease_token=secrets.token_hex(12), lease_until=until
                )
                conn.execute("UPDATE callbacks SET due_at = ? WHERE task_id = ?", (until, task_id))
                claimed.append(rows.save(conn, msgspec.structs.replace(task, callback=callback)))
            return claimed

        await self._may_write()
        return self._write(body)

    async def record_callback_attempt(self, attempt: CallbackAttempt) -> TaskRecord | None:
        a = attempt

        def body(conn: sqlite3.Connection, _now: float) -> TaskRecord | None:
            task = rows.load(conn, a.task_id)
            if task is None or task.tenant != a.tenant or task.callback is None:
                return None
            if task.callback.lease_token != a.lease_token:
                return None  # the lease ran out and another claim took it
            now = self._clock()
            retrying = a.status == "retrying" and not task.callback.once
            status = a.status if a.status != "retrying" or retrying else "failed"
            callback = msgspec.structs.replace(
                task.callback,
                status=status,
                attempt_count=task.callback.attempt_count + 1,
                delivered_at=now if status == "delivered" else task.callback.delivered_at,
                last_error=None if status == "delivered" else a.last_error,
                next_attempt_at=a.next_attempt_at if retrying else None,
                lease_token=None,
                lease_until=None,
                once=task.callback.once and retrying,
            )
            if retrying:
                conn.execute(
                    "UPDATE callbacks SET due_at = ? WHERE task_id = ?",
                    (a.next_attempt_at, a.task_id),
                )
            elif status == "delivered":
                conn.execute("DELETE FROM callbacks WHERE task_id = ?", (a.task_id,))
            else:
                conn.execute(
                    "UPDATE callbacks SET state = 'failed', due_at = ? WHERE task_id = ?",
                    (now, a.task_id),
                )
            return rows.save(conn, msgspec.structs.replace(task, callback=callback))

        await self._may_write()
        return self._write(body)

    async def redeliver_callback(self, tenant: str, task_id: str) -> TaskRecord | None:
        def body(conn: sqlite3.Connection, _now: float) -> TaskRecord | None:
            task = rows.load(conn, task_id)
            if task is None or task.tenant != tenant:
                return None
            callback = task.callback
            if callback is None or task.status not in TERMINAL:
                return task
            now = self._clock()
            if callback.status in CALLBACK_OPEN:
                if callback.lease_until is not None and callback.lease_until > now:
                    return task  # an attempt is under way
                callback = msgspec.structs.replace(callback, next_attempt_at=now)
            else:
                callback = msgspec.structs.replace(
                    callback, status="pending", next_attempt_at=now, once=True
                )
            conn.execute(
                "INSERT OR REPLACE INTO callbacks (task_id, tenant, state, due_at)"
                " VALUES (?, ?, 'due', ?)",
                (task_id, tenant, now),
            )
            return rows.save(conn, msgspec.structs.replace(task, callback=callback))

        await self._may_write()
        return self._write(body)

    async def failed_callbacks(self, *, limit: int) -> list[TaskRecord]:
        found = self._rows(
            "SELECT t.record FROM callbacks c JOIN tasks t ON t.task_id = c.task_id"
            " WHERE c.state = 'failed' ORDER BY c.due_at DESC LIMIT ?",
            (limit,),
        )
        return [rows.decoder.decode(row[0]) for row in found]

    async def callback_backlog(self) -> int:
        found = self._rows("SELECT count(*) FROM callbacks WHERE state = 'due'", ())
        return int(found[0][0])
