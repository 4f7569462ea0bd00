"""The Redis store's task listing: index zsets the task scripts keep, and task retention.

Besides the tenant's `tasks` zset (every task of the tenant by its sequence), a task is in
three zsets scored the same way: its tenant's tasks in its status, of its capability, and in
both (`RedisKeys.task_indexes`). `task_confirm.lua` lists it (an unconfirmed task is listed
nowhere), every script that changes its status moves it (`index_move` in task_common.lua), in
the same atomic step. So a listing with any filters reads one zset from the `after` position:
a page costs O(limit) commands and keys, however many of the tenant's tasks do not match. All
of it is in the tenant's slot.

Retention: a task that ends gets a TTL on its hash (the store's `set_task_retention`,
`task_retention_days` in the routing file) and an entry in its tenant's `task_expiry`;
`sweep_tasks` walks the tenants (`tenants.py`) and takes those entries out of the zsets once the
time has come. A listing that meets an entry whose hash has expired before the sweep skips it,
removes it and reads on, so a page is never short or padded because of one. Tasks written
before the indexes existed are put in them, once, by `backfill_task_indexes` (`task_reindex`
per task; the version marker makes it one-time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from redis.asyncio import Redis, RedisCluster

from gateway.store.redis.codec import decode_task, text
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys
from gateway.store.redis.tenants import TenantWalk
from gateway.store.tasks import TASK_RETENTION_SECONDS, TaskPage, TaskRecord, TaskStatus

if TYPE_CHECKING:
    from gateway.store.redis.scripts import Scripts

__all__ = ["INDEX_VERSION", "RedisTaskIndexArea"]

INDEX_VERSION = b"1"
"""Written to `task_index_version` once every task written before is in the indexes."""

_MAX_BATCH = 1000
"""Entries read at once when a page has to look past expired ones."""
_BACKFILL_BATCH = 200
"""Task keys per SCAN step of the backfill (one pipeline of `task_reindex` calls each)."""

_expiry_entry = msgspec.msgpack.Decoder(tuple[str, str, str, str])
"""A `task_expiry` member as `retain_for` packs it: task_id, tenant, capability, status."""


class RedisTaskIndexArea:
    """Listing, retention and backfill of `RedisStore` (a mixin: the store has the client)."""

    keys: RedisKeys
    _task_retention_ms: int = int(TASK_RETENTION_SECONDS * 1000)
    _indexes_ready = False
    _sweep_walk: TenantWalk

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis | RedisCluster: ...
        @property
        def _s(self) -> Scripts: ...

    def set_task_retention(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("task retention must be positive")
        self._task_retention_ms = max(1, round(seconds * 1000))

    def _retention_ms(self) -> int:
        """What a script that may end a task is given: how long the ended task is kept."""
        return self._task_retention_ms

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
        k, client = self.keys, self.client
        order = k.tenant_tasks(tenant)
        if status is None and capability is None:
            index = order
        else:
            index = k.task_index(tenant, status or "", capability or "")
        found: list[TaskRecord] = []
        batch = limit + 1
        with store_errors:
            top = "+inf"
            if after is not None:
                seq = await client.zscore(order, after)
                if seq is None:
                    return TaskPage(tasks=[], has_more=False)
                top = f"({int(seq)}"
            # Newest first until a page and one more: only entries whose task has just expired
            # (or just changed status) are passed over, so this is one round but for those.
            while len(found) <= limit:
                ids: Any = await client.zrevrangebyscore(
                    index, top, "-inf", start=0, num=batch, withscores=True
                )
                if not ids:
                    break
                async with client.pipeline(transaction=False) as pipe:
                    for task_id, _ in ids:
                        pipe.hgetall(k.task(tenant, task_id.decode()))
                    rows = await pipe.execute()
                expired: list[bytes] = []
                for (task_id, _), row in zip(ids, rows, strict=True):
                    task = decode_task(row)
                    if task is None:
                        expired.append(task_id)
                    elif (status is None or task.status == status) and (
                        capability is None or task.capability == capability
                    ):
                        found.append(task)
                        if len(found) > limit:
                            break
                if expired:
                    await self._forget(order, index, expired)
                if len(ids) < batch:
                    break
                top, batch = f"({int(ids[-1][1])}", min(batch * 2, _MAX_BATCH)
        return TaskPage(tasks=found[:limit], has_more=len(found) > limit)

    async def _forget(self, order: str, index: str, task_ids: Sequence[bytes]) -> None:
        """Entries of expired tasks met by a listing (the sweep takes their other entries)."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zrem(order, *task_ids)
            if index != order:
                pipe.zrem(index, *task_ids)
            await pipe.execute()

    async def sweep_tasks(self, *, limit: int = 500) -> int:
        """Tenant by tenant (`tenants.py`): at most `limit` tasks and one page of tenants."""
        k, client = self.keys, self.client
        swept = 0
        with store_errors:
            seconds, micros = await client.time()  # the clock the scripts' expiries are on
            now = seconds + micros / 1e6
            for tenant in await self._sweep_walk.page(client, k):
                expiry = k.task_expiry(tenant)
                members: Any = await client.zrangebyscore(
                    expiry, "-inf", now, start=0, num=limit - swept
                )
                if not members:
                    continue
                async with client.pipeline(transaction=False) as pipe:
                    for member in members:
                        task_id, _, capability, status = _expiry_entry.decode(member)
                        pipe.delete(k.task(tenant, task_id))  # gone by its TTL: never live
                        pipe.zrem(k.tenant_tasks(tenant), task_id)
                        for index in k.task_indexes(tenant, status, capability):
                            pipe.zrem(index, task_id)
                    pipe.zrem(expiry, *members)
                    await pipe.execute()
                swept += len(members)
                if swept >= limit:
                    break
        return swept

    async def backfill_task_indexes(self) -> int:
        if self._indexes_ready:
            return 0
        k, client = self.keys, self.client
        indexed = 0
        with store_errors:
            if await client.get(k.task_index_version()) == INDEX_VERSION:
                self._indexes_ready = True
                return 0
            batch: list[str] = []
            async for name in client.scan_iter(
                match=k.task_pattern(), count=_BACKFILL_BATCH, _type="HASH"
            ):
                batch.append(text(name))
                if len(batch) >= _BACKFILL_BATCH:
                    indexed += await self._reindex(batch)
                    batch = []
            if batch:
                indexed += await self._reindex(batch)
            await client.set(k.task_index_version(), INDEX_VERSION)
        self._indexes_ready = True
        return indexed

    async def _reindex(self, names: Sequence[str]) -> int:
        """`task_reindex` for each task key (its capability read first: it builds the keys)."""
        k, client, script = self.keys, self.client, self._s.task_reindex
        tasks = [k.task_id_of(name) for name in names]
        async with client.pipeline(transaction=False) as pipe:
            for tenant, task_id in tasks:
                pipe.hget(k.task(tenant, task_id), "capability")
            capabilities: list[Any] = await pipe.execute()
        indexed = 0
        for (tenant, task_id), capability in zip(tasks, capabilities, strict=True):
            res = await script(
                keys=(
                    k.task(tenant, task_id),
                    k.task_expiry(tenant),
                    *k.task_index_block(tenant, text(capability or b"")),
                ),
                args=(self._task_retention_ms, text(capability or b"")),
            )
            indexed += int(res[1]) if res[0] == b"ok" else 0
        return indexed
