"""The Redis task queue's upkeep: its depth for `/metrics`, and the reconcile that puts back
the queue entry of an open task a crash or a failover lost (`task_queue.py`, step 4).

The reconcile walks the tenants a page at a time (`tenants.py`) and, per tenant, the open
tasks due for a check (`tasks_open`, by when to check next); it is run every
`RECONCILE_EVERY` seconds by whichever claiming process takes the turn (a short `SET NX`), so
one process of the deployment does it at a time.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis, RedisCluster

from gateway.errors import StoreUnavailable
from gateway.store.redis.codec import text
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import TASK_GROUP, RedisKeys
from gateway.store.redis.tasks import RECHECK_SECONDS
from gateway.store.redis.tenants import TenantWalk

__all__ = ["RECONCILE_EVERY", "RedisTaskQueueUpkeepArea"]

RECONCILE_EVERY = 10.0
"""How often the queue is reconciled: the first claiming process to take the turn does it."""
_RECONCILE_BATCH = 100


class RedisTaskQueueUpkeepArea:
    """The queue's depth and reconcile for `RedisStore` (a mixin: the store has the clients)."""

    keys: RedisKeys
    _reconciled_at: float
    _reconcile_walk: TenantWalk

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis | RedisCluster: ...
        async def _enqueue(self, tenant: str, task_id: str, capability: str) -> int: ...

    async def task_queue_depth(self) -> int:
        """Entries not yet delivered to a worker, over every shard: each shard's stream length
        less its pending entries (2 commands a shard, one round trip per node)."""
        k = self.keys
        with store_errors:
            async with self.client.pipeline(transaction=False) as pipe:
                for shard in range(k.shards):
                    pipe.xlen(k.task_queue(shard))
                    pipe.xpending(k.task_queue(shard), TASK_GROUP)
                res: list[Any] = await pipe.execute(raise_on_error=False)
        depth = 0
        for length, pending in zip(res[::2], res[1::2], strict=True):
            if isinstance(length, int):
                count = pending["pending"] if isinstance(pending, dict) else 0
                depth += max(0, length - count)
        return depth

    async def reconcile_task_queue(self, *, older_than: float = RECHECK_SECONDS) -> int:
        """Add the queue entry of every open task checked last more than `older_than` seconds
        ago, where it is missing (one page of tenants per call); how many were missing."""
        k, client = self.keys, self.client
        with store_errors:
            seconds, micros = await client.time()
        now = seconds + micros / 1e6
        added = 0
        for tenant in await self._reconcile_walk.page(client, k):
            open_key = k.tasks_open(tenant)
            with store_errors:
                ids: Any = await client.zrangebyscore(
                    open_key, "-inf", now - older_than + RECHECK_SECONDS, 0, _RECONCILE_BATCH
                )
                if not ids:
                    continue
                async with client.pipeline(transaction=False) as pipe:
                    for raw in ids:
                        pipe.hmget(k.task(tenant, raw.decode()), ["status", "capability"])
                    rows: list[Any] = await pipe.execute()
            for raw, (status, capability) in zip(ids, rows, strict=True):
                task_id = raw.decode()
                if status in (b"queued", b"running"):
                    added += await self._enqueue(tenant, task_id, text(capability))
                with store_errors:
                    await client.zadd(open_key, {task_id: now + RECHECK_SECONDS}, xx=True)
        return added

    async def _maybe_reconcile(self, worker_id: str) -> None:
        """Reconcile the shards this process wins the turn of, every `RECONCILE_EVERY`."""
        now = time.monotonic()
        if now - self._reconciled_at < RECONCILE_EVERY:
            return
        self._reconciled_at = now
        try:
            k = self.keys
            with store_errors:
                won = await self.client.set(
                    k.reconcile_lock(0), worker_id, nx=True, px=int(RECONCILE_EVERY * 1000)
                )
            if won:
                await self.reconcile_task_queue()
        except StoreUnavailable:
            pass
