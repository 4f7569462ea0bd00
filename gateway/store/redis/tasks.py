"""The Redis store's task area: tasks as hashes, each transition one script (`task_*.lua`)
that re-checks the task's status where it changes it. Claiming (the queue, a Stream with a
consumer group) is `task_queue.py`'s.

A task hash holds `TaskRecord`'s fields under their own names: scalars as strings (progress
flattened to percent, stage, message), the structured ones (input, metadata, output, error,
usage, warnings) as msgpack the scripts never look into; and `seq` (its place in the tenant's
list) and `entry` (its stream entry id).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import msgspec
from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from gateway.store import buckets
from gateway.store.ledger_ids import debit_id, hold_id, refund_id
from gateway.store.redis.codec import decode_task as _task
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import TASK_GROUP, RedisKeys
from gateway.store.tasks import (
    TaskAbandon,
    TaskConfirm,
    TaskCreate,
    TaskCreateOutcome,
    TaskCreateResult,
    TaskFinal,
    TaskProgress,
    TaskRecord,
)

if TYPE_CHECKING:
    from gateway.store.redis.scripts import Scripts

__all__ = ["RedisTaskArea"]

_FENCE_SECONDS = 86_400
"""An abandoned create's id stays fenced this long (a command buffered in a stalled Redis
runs within seconds of its waking up)."""

_encoder = msgspec.msgpack.Encoder()
_STATIC = ("task_id", "tenant", "api_key_id", "request_id", "capability", "model")
_OUTCOMES = {o.value.encode(): o for o in TaskCreateOutcome}


class RedisTaskArea:
    """The task operations of `RedisStore` (a mixin: the store has the clients and scripts)."""

    keys: RedisKeys
    url: str

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis: ...
        @property
        def _s(self) -> Scripts: ...
        async def _eval(
            self, script: AsyncScript, keys: Sequence[str], args: Sequence[Any]
        ) -> Any: ...
        async def _eval_hot(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any: ...
        def _retention_keys(self) -> tuple[str]: ...
        def _retention_args(self) -> tuple[str, int]: ...

    async def create_task(self, create: TaskCreate) -> TaskCreateResult:
        c, k, claim = create, self.keys, create.idempotency
        limits = c.limits
        static = [f for name in _STATIC for f in (name, getattr(c, name))]
        static += ["resolved_model", c.resolved_model, "price_units", c.price_units]
        static += ["input", _encoder.encode(c.input), "metadata", _encoder.encode(c.metadata)]
        res = await self._task_hot(
            "task_create",
            c.task_id,
            (
                limits.requests_per_minute,
                limits.tokens_per_minute,
                1 if claim else 0,
                claim.fingerprint if claim else "",
                c.reply_ttl_seconds,
                c.task_id,
                c.tenant,
                c.price_units,
                hold_id(c.task_id),
                c.hold_seconds,
                k.task_key_prefix(),
                claim.scope if claim else "",
                *static,
            ),
            (
                k.rate(c.api_key_id),
                k.idempotency(claim.scope if claim else ""),
                k.holds(c.tenant),
                k.hold_expiry(c.tenant),
                k.task_seq(c.tenant),
                k.task_fence(c.task_id),
                k.tasks_unconfirmed(),
            ),
        )
        if res[0] == b"conflict":
            raise ValueError(f"task id {c.task_id!r} belongs to another tenant")
        outcome = _OUTCOMES[res[0]]
        limited = outcome is TaskCreateOutcome.RATE_LIMITED
        return TaskCreateResult(
            outcome=outcome,
            rate=buckets.state(limits, float(res[2]), float(res[3]), 0, limited),
            task=_task(res[4]),
            available_units=res[1],
        )

    async def confirm_task(self, confirm: TaskConfirm) -> TaskRecord | None:
        k, tenant, task_id = self.keys, confirm.tenant, confirm.task_id
        res = await self._task_hot(
            "task_confirm",
            task_id,
            (tenant, hold_id(task_id), debit_id(task_id), *self._retention_args()),
            (
                k.holds(tenant),
                k.hold_expiry(tenant),
                k.tasks_unconfirmed(),
                *self._retention_keys(),
                k.tenant_tasks(tenant),
            ),
        )
        return _task(res)

    async def abandon_task(self, abandon: TaskAbandon) -> None:
        k, tenant, task_id = self.keys, abandon.tenant, abandon.task_id
        await self._task_hot(
            "task_abandon",
            task_id,
            (tenant, hold_id(task_id), _FENCE_SECONDS, task_id, *self._retention_args()),
            (
                k.holds(tenant),
                k.hold_expiry(tenant),
                k.tasks_unconfirmed(),
                k.task_fence(task_id),
                k.tenant_tasks(tenant),
                k.idempotency(abandon.idempotency_scope),
                *self._retention_keys(),
            ),
        )

    async def abandon_unconfirmed(self, *, older_than: float, limit: int = 100) -> int:
        k, client = self.keys, self.client
        with store_errors:
            seconds, micros = await client.time()
            ids: Any = await client.zrangebyscore(
                k.tasks_unconfirmed(), "-inf", seconds + micros / 1e6 - older_than, 0, limit
            )
        for raw in ids:
            task_id = raw.decode()
            with store_errors:
                fields: Any = await client.hmget(k.task(task_id), ["tenant", "idem"])
            tenant, scope = (value.decode() if value else "" for value in fields)
            await self.abandon_task(
                TaskAbandon(tenant=tenant, task_id=task_id, idempotency_scope=scope)
            )
        return len(ids)

    async def get_task(self, tenant: str, task_id: str) -> TaskRecord | None:
        with store_errors:
            fields: Any = await self.client.hgetall(self.keys.task(task_id))
        task = _task(fields)
        return task if task is not None and task.tenant == tenant else None

    async def touch_task(
        self,
        task_id: str,
        worker_id: str,
        *,
        lease_seconds: float,
        progress: TaskProgress | None = None,
        input: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        p = progress
        res = await self._task_script(
            self._s.task_touch,
            task_id,
            (
                worker_id,
                lease_seconds,
                1 if p else 0,
                *((repr(p.percent), p.stage, p.message) if p else (0, "", "")),
                0 if input is None else 1,
                b"" if input is None else _encoder.encode(input),
            ),
        )
        return _task(res)

    async def request_cancel(self, tenant: str, task_id: str) -> TaskRecord | None:
        k = self.keys
        res = await self._task_script(
            self._s.task_cancel,
            task_id,
            (tenant, refund_id(task_id), "canceled", hold_id(task_id), *self._retention_args()),
            (
                k.holds(tenant),
                k.hold_expiry(tenant),
                k.tasks_unconfirmed(),
                *self._retention_keys(),
                k.tenant_tasks(tenant),
            ),
        )
        return _task(res)

    async def finalize_task(self, final: TaskFinal) -> TaskRecord:
        f = final
        if f.refund_units < 0:
            raise ValueError("refund_units must not be negative")
        res = await self._task_script(
            self._s.task_finalize,
            f.task_id,
            (
                f.status,
                f.refund_units,
                refund_id(f.task_id),
                f.reason,
                _encoder.encode(f.output),
                _encoder.encode(f.usage),
                _encoder.encode(f.warnings),
                0 if f.error is None else 1,
                b"" if f.error is None else _encoder.encode(f.error),
                *self._retention_args(),
            ),
            self._retention_keys(),
        )
        if res[0] == b"unknown":
            raise KeyError(f.task_id)
        if res[0] == b"unconfirmed":
            raise ValueError(f"task {f.task_id!r} was never confirmed")
        if res[0] == b"too_much":
            raise ValueError(f"refund {f.refund_units} exceeds the price {res[1]}")
        return cast(TaskRecord, _task(res[1]))

    async def _task_hot(
        self, name: str, task_id: str, args: Sequence[Any], more_keys: Sequence[str]
    ) -> Any:
        """A task create step through the request path's pipeline (see `_HotScripts`)."""
        k = self.keys
        return await self._eval_hot(
            name,
            (k.task(task_id), k.task_queue(), k.tasks_queued(), *more_keys),
            (TASK_GROUP, k.wallet(""), k.ledger(""), k.ledger_order(""), *args),
        )

    async def _task_script(
        self,
        script: AsyncScript,
        task_id: str,
        args: Sequence[Any],
        more_keys: Sequence[str] = (),
    ) -> Any:
        """A task script: the keys and arguments every one of them starts with, then its own."""
        k = self.keys
        return await self._eval(
            script,
            (k.task(task_id), k.task_queue(), k.tasks_queued(), *more_keys),
            (TASK_GROUP, k.wallet(""), k.ledger(""), k.ledger_order(""), *args),
        )
