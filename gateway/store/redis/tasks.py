"""The Redis store's task area: tasks as hashes in their tenant's slot, each transition one script
(`task_*.lua`) that re-checks the task's status where it changes it. The queue (a Stream per
shard, another slot) is `task_queue.py`'s; listing and retention `task_index.py`'s.

A task hash holds `TaskRecord`'s fields under their own names: scalars as strings (progress
flattened to percent, stage, message), the structured ones (input, metadata, output, error,
usage, warnings) as msgpack the scripts never look into; and `seq` (its place in the tenant's
list) and `shard` (its queue shard, once queued).

A status change moves the task in the listing indexes of its capability, whose keys the caller
builds: the capability comes from what this process saw of the task (a create, a claim), else
the script names it and the call is made again with the right keys. The steps that move money
(create, confirm, cancel, finalize) are durable (docs/store.md, "Failover").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import msgspec
from redis.asyncio import Redis, RedisCluster
from redis.commands.core import AsyncScript

from gateway.errors import StoreUnavailable
from gateway.store import buckets
from gateway.store.ledger_ids import debit_id, hold_id, refund_id
from gateway.store.redis.codec import callback_fields, text
from gateway.store.redis.codec import decode_task as _task
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys
from gateway.store.redis.tenants import Registrations, TenantWalk
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

__all__ = ["RECHECK_SECONDS", "RedisTaskArea"]

_FENCE_SECONDS = 86_400
"""An abandoned create's id stays fenced this long (a command buffered in a stalled Redis
runs within seconds of its waking up)."""

RECHECK_SECONDS = 30.0
"""A queued task (or a running one past its lease) is checked for its queue entry by the
reconcile this long after it was queued (or its lease ran out), then as often."""

_CAPABILITIES = 4096
"""Task capabilities this process remembers (to build index keys without asking)."""

_encoder = msgspec.msgpack.Encoder()
_STATIC = ("task_id", "tenant", "api_key_id", "request_id", "capability", "model")
_OUTCOMES = {o.value.encode(): o for o in TaskCreateOutcome}


class RedisTaskArea:
    """The task operations of `RedisStore` (a mixin: the store has the clients and scripts)."""

    keys: RedisKeys
    url: str
    _capabilities: dict[str, str]
    _registered: Registrations
    _unconfirmed_walk: TenantWalk

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis | RedisCluster: ...
        @property
        def _s(self) -> Scripts: ...
        async def _eval(
            self, script: AsyncScript, keys: Sequence[str], args: Sequence[Any]
        ) -> Any: ...
        async def _eval_hot(
            self, name: str, keys: Sequence[str], args: Sequence[Any], *, durable: bool = False
        ) -> Any: ...
        async def _command_hot(self, key: str, *args: Any) -> Any: ...
        def _retention_ms(self) -> int: ...
        async def _enqueue(self, tenant: str, task_id: str, capability: str) -> int: ...
        async def _drop_entry(self, tenant: str, task_id: str, entry: bytes = b"") -> None: ...

    async def create_task(self, create: TaskCreate) -> TaskCreateResult:
        c, k, claim = create, self.keys, create.idempotency
        limits = c.limits
        await self._register(c.tenant)
        static = [f for name in _STATIC for f in (name, getattr(c, name))]
        static += ["resolved_model", c.resolved_model, "price_units", c.price_units]
        static += ["input", _encoder.encode(c.input), "metadata", _encoder.encode(c.metadata)]
        if c.callback is not None:
            static += callback_fields(c.callback)
        keys = [
            k.task(c.tenant, c.task_id),
            k.rate(c.tenant, c.api_key_id),
            k.idempotency(c.tenant, claim.scope if claim else ""),
            k.holds(c.tenant),
            k.hold_expiry(c.tenant),
            k.task_seq(c.tenant),
            k.task_fence(c.tenant, c.task_id),
            k.tasks_unconfirmed(c.tenant),
            k.wallet(c.tenant),
        ]
        named = ""
        for _ in range(3):  # a record that names another task: once more with its key
            res = await self._eval_hot(
                "task_create",
                [*keys, k.task(c.tenant, named)] if named else keys,
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
                    claim.scope if claim else "",
                    named,
                    c.api_key_id,
                    c.budget.units if c.budget is not None else -1,
                    c.budget.period if c.budget is not None else "",
                    *static,
                ),
                durable=True,
            )
            if res[0] != b"named":
                break
            named = text(res[1])
        else:
            raise RuntimeError(f"the idempotency record of {c.task_id!r} keeps changing")
        if res[0] == b"conflict":
            raise ValueError(f"task id {c.task_id!r} belongs to another tenant")
        outcome = _OUTCOMES[res[0]]
        limited = outcome is TaskCreateOutcome.RATE_LIMITED
        task = _task(res[4])
        if task is not None:
            self._remember(task.task_id, task.capability)
        return TaskCreateResult(
            outcome=outcome,
            rate=buckets.state(limits, float(res[2]), float(res[3]), 0, limited),
            task=task,
            available_units=res[1],
        )

    async def confirm_task(self, confirm: TaskConfirm) -> TaskRecord | None:
        """The confirm script, then (a step of its own, in the queue shard) the queue entry of
        a task that is queued: idempotent, so a confirm retried adds none twice."""
        k, tenant, task_id = self.keys, confirm.tenant, confirm.task_id

        def confirm_with(capability: str) -> Awaitable[Any]:
            return self._eval_hot(
                "task_confirm",
                k.task_lists_and_money(tenant, task_id, capability),
                (
                    tenant,
                    hold_id(task_id),
                    debit_id(task_id),
                    capability,
                    self._retention_ms(),
                    k.shard_of(tenant),
                    RECHECK_SECONDS,
                ),
                durable=True,
            )

        res = await self._with_capability(task_id, confirm_with)
        task = _task(res[1])
        if task is not None and task.status == "queued":
            await self._enqueue(tenant, task_id, task.capability)
        return task

    async def abandon_task(self, abandon: TaskAbandon) -> None:
        k, tenant, task_id = self.keys, abandon.tenant, abandon.task_id
        await self._eval_hot(
            "task_abandon",
            (
                k.task(tenant, task_id),
                k.holds(tenant),
                k.hold_expiry(tenant),
                k.tasks_unconfirmed(tenant),
                k.task_fence(tenant, task_id),
                k.tenant_tasks(tenant),
                k.idempotency(tenant, abandon.idempotency_scope),
            ),
            (tenant, hold_id(task_id), _FENCE_SECONDS, task_id),
        )

    async def abandon_unconfirmed(self, *, older_than: float, limit: int = 100) -> int:
        """Tenant by tenant (`tenants.py`): at most `limit` tasks and one page of tenants."""
        k, client = self.keys, self.client
        with store_errors:
            seconds, micros = await client.time()
        before = seconds + micros / 1e6 - older_than
        done = 0
        for tenant in await self._unconfirmed_walk.page(client, k):
            with store_errors:
                ids: Any = await client.zrangebyscore(
                    k.tasks_unconfirmed(tenant), "-inf", before, 0, limit - done
                )
            for raw in ids:
                task_id = raw.decode()
                with store_errors:
                    scope: Any = await client.hget(k.task(tenant, task_id), "idem")
                abandon = TaskAbandon(
                    tenant=tenant, task_id=task_id, idempotency_scope=text(scope or b"")
                )
                await self.abandon_task(abandon)
            done += len(ids)
            if done >= limit:
                break
        return done

    async def get_task(self, tenant: str, task_id: str) -> TaskRecord | None:
        key = self.keys.task(tenant, task_id)
        task = _task(await self._command_hot(key, "HGETALL", key))
        return task if task is not None and task.tenant == tenant else None

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
        p, k = progress, self.keys
        res = await self._eval(
            self._s.task_touch,
            (k.task(tenant, task_id), k.tasks_open(tenant)),
            (
                worker_id,
                lease_seconds,
                1 if p else 0,
                *((repr(p.percent), p.stage, p.message) if p else (0, "", "")),
                0 if input is None else 1,
                b"" if input is None else _encoder.encode(input),
                RECHECK_SECONDS,
            ),
        )
        return _task(res)

    async def request_cancel(self, tenant: str, task_id: str) -> TaskRecord | None:
        k = self.keys

        def cancel_with(capability: str) -> Awaitable[Any]:
            return self._eval_hot(
                "task_cancel",
                (*k.task_lists_and_money(tenant, task_id, capability), k.callbacks_due(tenant)),
                (
                    tenant,
                    refund_id(task_id),
                    "canceled",
                    hold_id(task_id),
                    self._retention_ms(),
                    capability,
                ),
                durable=True,
            )

        task = _task((await self._with_capability(task_id, cancel_with))[1])
        if task is not None and task.status == "canceled":
            await self._drop_entry(tenant, task_id)
        return task

    async def finalize_task(self, final: TaskFinal) -> TaskRecord:
        f, k, tenant = final, self.keys, final.tenant
        if f.refund_units < 0:
            raise ValueError("refund_units must not be negative")

        def finalize_with(capability: str) -> Awaitable[Any]:
            return self._eval_hot(
                "task_finalize",
                (
                    k.task(tenant, f.task_id),
                    k.tasks_open(tenant),
                    k.task_expiry(tenant),
                    *k.money(tenant),
                    *k.task_index_block(tenant, capability),
                    k.callbacks_due(tenant),
                ),
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
                    self._retention_ms(),
                    capability,
                ),
                durable=True,
            )

        res = await self._with_capability(f.task_id, finalize_with)
        if res[0] == b"unknown":
            raise KeyError(f.task_id)
        if res[0] == b"unconfirmed":
            raise ValueError(f"task {f.task_id!r} was never confirmed")
        if res[0] == b"too_much":
            raise ValueError(f"refund {f.refund_units} exceeds the price {res[1]}")
        await self._drop_entry(tenant, f.task_id)
        return cast(TaskRecord, _task(res[1]))

    async def _register(self, tenant: str) -> None:
        """The tenant in its shard's registry before its task is written (`tenants.py`). The
        registry may live on another master than the tenant: once this process registered the
        tenant, a refresh that master cannot answer waits for a later create instead of
        failing this one."""
        if self._registered.due(tenant):
            registry = self.keys.shard_tenants(self.keys.shard_of(tenant))
            try:
                await self._command_hot(registry, "ZADD", registry, "NX", 0, tenant)
            except StoreUnavailable:
                if self._registered.known(tenant):
                    return
                raise
            self._registered.done(tenant)

    async def _with_capability(self, task_id: str, run: Callable[[str], Awaitable[Any]]) -> Any:
        """`run(capability)` with the task's capability as this process knows it; again with
        the one the script names when it was not (or not known)."""
        capability = self._capabilities.get(task_id, "")
        for _ in range(3):
            res = await run(capability)
            if res[0] != b"capability":
                return res
            capability = text(res[1])
            self._remember(task_id, capability)
        raise RuntimeError(f"the capability of task {task_id!r} keeps changing")

    def _remember(self, task_id: str, capability: str) -> None:
        known = self._capabilities
        known[task_id] = capability
        if len(known) > _CAPABILITIES:
            del known[next(iter(known))]
