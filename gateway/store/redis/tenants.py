"""The registry of tenants that have tasks, which the work spanning tenants walks.

Everything of a tenant is in its own hash slot, so what spans tenants (abandoning unconfirmed
creates, the retention sweep, the queue's reconcile) goes tenant by tenant. A tenant enters its
queue shard's registry (`keys.shard_tenants`, a zset by name) before its first task is written:
`create_task` adds it first, in a step of its own (repeated by each process every
`REGISTER_EVERY` seconds, in case a failover lost it), so a tenant with a task is always
found. Tenants stay registered (one small member each, bounded by the routing file's tenants).

`TenantWalk` hands out the registered tenants a page per call, resuming where its last call
stopped and going round all shards, so every call is bounded however many tenants there are.
"""

from __future__ import annotations

import time
from typing import Any

from redis.asyncio import Redis, RedisCluster

from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys

__all__ = ["REGISTER_EVERY", "TENANT_PAGE", "Registrations", "TenantWalk"]

TENANT_PAGE = 500
"""Tenants one call of a cross-tenant operation visits at most."""

REGISTER_EVERY = 600.0
"""A process registers a tenant again after this many seconds (a no-op unless lost)."""


class Registrations:
    """When this process last registered each tenant (so a create rarely pays for it)."""

    __slots__ = ("_at",)

    def __init__(self) -> None:
        self._at: dict[str, float] = {}

    def due(self, tenant: str) -> bool:
        at = self._at.get(tenant)
        return at is None or time.monotonic() - at > REGISTER_EVERY

    def done(self, tenant: str) -> None:
        self._at[tenant] = time.monotonic()

    def known(self, tenant: str) -> bool:
        """This process registered `tenant` before (the registry keeps it: a refresh is only a
        guard, which may wait when the registry's master cannot answer)."""
        return tenant in self._at


class TenantWalk:
    """A cursor over every shard's registry: `page()` gives the next tenants, at most `size`,
    visiting each shard at most once per call."""

    __slots__ = ("_after", "_shard", "size")

    def __init__(self, size: int = TENANT_PAGE) -> None:
        self.size = size
        self._shard = 0
        self._after = b""

    async def page(self, client: Redis | RedisCluster, keys: RedisKeys) -> list[str]:
        found: list[str] = []
        for _ in range(keys.shards):
            shard = self._shard % keys.shards
            start = b"(" + self._after if self._after else b"-"
            want = self.size - len(found)
            with store_errors:
                names: Any = await client.zrange(
                    keys.shard_tenants(shard), start, b"+", bylex=True, offset=0, num=want
                )
            found += [name.decode() for name in names]
            if len(names) == want:
                self._after = names[-1]
                break
            self._shard, self._after = shard + 1, b""
        return found
