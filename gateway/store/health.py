"""Whether the store answers and writes money as durably as it should, found out within a
bound: health never waits behind a stall.

One probe (`Store.ping`, and `Store.durability` beside it) runs at a time, shared by every
caller; a caller waits for it at most `timeout` seconds and counts a late answer as "does not
answer". So `/v1/health` answers within about `timeout`, says `degraded` while the store is
stalled or away, or while a shard writes money less durably than configured (a cluster master
without the replicas a money write waits for), and a burst of health checks during a stall
costs one probe, not one connection each.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple

from gateway.store.base import Store

__all__ = ["HEALTH_TIMEOUT_SECONDS", "StoreHealth", "StoreState"]

HEALTH_TIMEOUT_SECONDS = 0.25


class StoreState(NamedTuple):
    answers: bool
    reduced: tuple[str, ...] = ()
    """The shards whose money writes are less durable than configured (docs/store.md)."""


class StoreHealth:
    def __init__(self, store: Store, *, timeout: float = HEALTH_TIMEOUT_SECONDS) -> None:
        self._store = store
        self._timeout = timeout
        self._probe: asyncio.Task[StoreState] | None = None

    async def state(self) -> StoreState:
        probe = self._probe
        if probe is None or probe.done():
            probe = self._probe = asyncio.get_running_loop().create_task(self._look())
        try:
            async with asyncio.timeout(self._timeout):
                # Shielded: a caller that gives up must not cancel the probe the others share.
                return await asyncio.shield(probe)
        except TimeoutError:
            return StoreState(answers=False)

    async def _look(self) -> StoreState:
        answers, shards = await asyncio.gather(
            self._store.ping(), self._store.durability(self._timeout)
        )
        return StoreState(answers, tuple(s.shard for s in shards if s.reduced))
