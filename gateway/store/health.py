"""Whether the store answers, found out within a bound: health never waits behind a stall.

One probe (`Store.ping`) runs at a time, shared by every caller; a caller waits for it at most
`timeout` seconds and counts a late answer as "does not answer". So `/v1/health` answers within
about `timeout`, says `degraded` while the store is stalled or away, and a burst of health
checks during a stall costs one probe, not one connection each.
"""

from __future__ import annotations

import asyncio

from gateway.store.base import Store

__all__ = ["HEALTH_TIMEOUT_SECONDS", "StoreHealth"]

HEALTH_TIMEOUT_SECONDS = 0.25


class StoreHealth:
    def __init__(self, store: Store, *, timeout: float = HEALTH_TIMEOUT_SECONDS) -> None:
        self._store = store
        self._timeout = timeout
        self._probe: asyncio.Task[bool] | None = None

    async def store_answers(self) -> bool:
        probe = self._probe
        if probe is None or probe.done():
            probe = self._probe = asyncio.get_running_loop().create_task(self._store.ping())
        try:
            async with asyncio.timeout(self._timeout):
                # Shielded: a caller that gives up must not cancel the probe the others share.
                return await asyncio.shield(probe)
        except TimeoutError:
            return False
