"""The Redis store's task callbacks: each callback's state in its task's hash (`cb_*` fields,
`codec.py`), the delivery schedule and the failed ones as zsets of the tenant's slot
(`keys.py`: `callbacks_due`, `callbacks_failed`), and the tenant's signing secret.

The step that ends a task schedules its callback (task_common.lua `finish`). A delivery worker
walks the registered tenants (`tenants.py`) for due entries and claims each one with
`task_callback_claim.lua` in the tenant's slot, which alone decides (a lease token, the entry
moved to the lease's end); `task_callback_record.lua` applies an attempt's outcome only under
that token. So the schedule survives a restart or a failover of the gateway, and two processes
never attempt one callback at once.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis, RedisCluster
from redis.commands.core import AsyncScript

from gateway.store.callbacks import CallbackAttempt, CallbackSecrets
from gateway.store.redis.codec import decode_task, text
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys
from gateway.store.redis.tenants import TenantWalk
from gateway.store.tasks import TaskRecord

if TYPE_CHECKING:
    from gateway.store.redis.scripts import Scripts

__all__ = ["RedisCallbackArea"]


class RedisCallbackArea:
    """The callback operations of `RedisStore` (a mixin: the store has the clients)."""

    keys: RedisKeys
    _callback_walk: TenantWalk

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

    async def ensure_callback_secret(self, tenant: str, secret: str) -> CallbackSecrets:
        return await self._secret(tenant, "ensure", secret, 0)

    async def rotate_callback_secret(
        self, tenant: str, secret: str, *, grace_seconds: float
    ) -> CallbackSecrets:
        return await self._secret(tenant, "rotate", secret, grace_seconds)

    async def callback_secrets(self, tenant: str) -> CallbackSecrets | None:
        with store_errors:
            fields: Any = await self.client.hgetall(self.keys.callback_secret(tenant))
        return _secrets(tenant, fields) if fields else None

    async def claim_callbacks(self, *, lease_seconds: float, limit: int) -> list[TaskRecord]:
        """A page of registered tenants' due entries, read in one pipeline, then each claimed
        in its tenant's slot (where the claim alone decides)."""
        k, client = self.keys, self.client
        with store_errors:
            seconds, micros = await client.time()
        now = seconds + micros / 1e6
        tenants = await self._callback_walk.page(client, k)
        if not tenants:
            return []
        # More than `limit` each: another process may be claiming the first ones.
        with store_errors:
            async with client.pipeline(transaction=False) as pipe:
                for tenant in tenants:
                    pipe.zrangebyscore(k.callbacks_due(tenant), "-inf", now, 0, 4 * limit + 16)
                found: list[Any] = await pipe.execute()
        claimed: list[TaskRecord] = []
        for tenant, due in zip(tenants, found, strict=True):
            for raw in due:
                task_id = raw.decode()
                res = await self._eval(
                    self._s.task_callback_claim,
                    (k.task(tenant, task_id), k.callbacks_due(tenant)),
                    (task_id, lease_seconds, secrets.token_hex(12)),
                )
                task = decode_task(res[1]) if res[0] == b"claimed" else None
                if task is not None:
                    claimed.append(task)
                if len(claimed) >= limit:
                    return claimed
        return claimed

    async def record_callback_attempt(self, attempt: CallbackAttempt) -> TaskRecord | None:
        a, k = attempt, self.keys
        res = await self._eval(
            self._s.task_callback_record,
            (
                k.task(a.tenant, a.task_id),
                k.callbacks_due(a.tenant),
                k.callbacks_failed(a.tenant),
            ),
            (
                a.task_id,
                a.lease_token,
                a.status,
                repr(a.next_attempt_at or 0.0),
                a.last_error or "",
            ),
        )
        return decode_task(res[1]) if res[0] == b"ok" else None

    async def redeliver_callback(self, tenant: str, task_id: str) -> TaskRecord | None:
        k = self.keys
        res = await self._eval(
            self._s.task_callback_redeliver,
            (k.task(tenant, task_id), k.callbacks_due(tenant), k.callbacks_failed(tenant)),
            (task_id, tenant),
        )
        return decode_task(res[1])

    async def failed_callbacks(self, *, limit: int) -> list[TaskRecord]:
        """Every registered tenant's most recent ones, merged (an operator's page)."""
        k, client = self.keys, self.client
        found: list[tuple[float, str, str]] = []
        for tenant in await _all_tenants(client, k):
            with store_errors:
                ids: Any = await client.zrevrange(
                    k.callbacks_failed(tenant), 0, limit - 1, withscores=True
                )
            found += [(score, tenant, raw.decode()) for raw, score in ids]
        found.sort(reverse=True)
        tasks = []
        for _, tenant, task_id in found[:limit]:
            with store_errors:
                fields: Any = await client.hgetall(k.task(tenant, task_id))
            task = decode_task(fields)
            if task is not None:
                tasks.append(task)
        return tasks

    async def callback_backlog(self) -> int:
        k, client = self.keys, self.client
        tenants = await _all_tenants(client, k)
        if not tenants:
            return 0
        with store_errors:
            async with client.pipeline(transaction=False) as pipe:
                for tenant in tenants:
                    pipe.zcard(k.callbacks_due(tenant))
                counts: list[Any] = await pipe.execute()
        return sum(int(count) for count in counts)

    async def _secret(
        self, tenant: str, mode: str, secret: str, grace_seconds: float
    ) -> CallbackSecrets:
        res = await self._eval_hot(
            "callback_secret", (self.keys.callback_secret(tenant),), (mode, secret, grace_seconds)
        )
        return _secrets(tenant, dict(zip(res[::2], res[1::2], strict=True)))


async def _all_tenants(client: Redis | RedisCluster, keys: RedisKeys) -> list[str]:
    tenants: list[str] = []
    for shard in range(keys.shards):
        with store_errors:
            names: Any = await client.zrange(keys.shard_tenants(shard), 0, -1)
        tenants += [name.decode() for name in names]
    return tenants


def _secrets(tenant: str, fields: Mapping[bytes, bytes]) -> CallbackSecrets:
    previous = fields.get(b"previous")
    until = fields.get(b"previous_until")
    return CallbackSecrets(
        tenant=tenant,
        secret=text(fields[b"secret"]),
        created_at=float(fields[b"created_at"]),
        previous=text(previous) if previous is not None else None,
        previous_until=float(until) if until is not None else None,
    )
