"""The pipelined script client on a Redis Cluster: one `ScriptPipeline` per master, routed by
the slot of a call's first key (every key of a script shares its slot: keys.py).

The slot map comes from `CLUSTER SLOTS`, asked of a known node on the first call, and again
(one refresh at a time, shared) after a call met a node that failed or was not the slot's
owner. A refresh asks every known master and startup node at once, each within its own timeout,
and takes the first answer, so a dead or stalled node costs it nothing while another answers;
only a call made before there is any map waits for one, the others go by the map they have while
it is refreshed. Each master has its own connections (and watchdogs), so a master that stalls
fails the calls routed to it and no other. A `MOVED` reply means the node did not run the call:
the map is patched and refreshed and the call goes once to the node named; an `ASK` reply (a
slot being migrated) sends it once, after `ASKING`, to the node named, and leaves the map as it
is. Anything else fails the call as `ScriptPipeline` does (the store maps it to
`StoreUnavailable`): a call whose outcome is unknown is never resent here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store.durability import ShardDurability
from gateway.store.redis.pipeline import Address, LuaScript, ScriptPipeline

__all__ = ["ClusterScriptPipeline", "parse_cluster_slots"]

_REFRESH_GAP = 0.1
"""A failing node makes the map stale; it is asked again at most this often."""

_NEEDS_REFRESH = (RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError)


def parse_cluster_slots(reply: Sequence[Any], asked: Address) -> dict[int, Address]:
    """`CLUSTER SLOTS` as {first slot of a range: master}; an empty host is the node asked."""
    ranges: dict[int, Address] = {}
    for entry in reply:
        first, last, master = int(entry[0]), int(entry[1]), entry[2]
        host = master[0].decode() if isinstance(master[0], bytes) else str(master[0])
        address = (host or asked[0], int(master[1]))
        for slot in range(first, last + 1):
            ranges[slot] = address
    return ranges


def _consume(task: asyncio.Task[Any]) -> None:
    """A refresh whose callers gave up: read its outcome so that asyncio does not log it."""
    if not task.cancelled():
        task.exception()


class ClusterScriptPipeline:
    """`ScriptPipeline`'s interface over a cluster's masters (see the module docstring)."""

    def __init__(
        self,
        startup: Sequence[Address],
        link: Callable[[Address], ScriptPipeline],
        *,
        socket_timeout: float,
    ) -> None:
        self._startup = list(startup)
        self._make_link = link
        self._timeout = socket_timeout
        self._links: dict[Address, ScriptPipeline] = {}
        self._slots: list[Address | None] = []
        self._stale = True
        self._refreshed_at = -1.0
        self._refreshing: asyncio.Task[None] | None = None

    async def evalsha(
        self,
        script: LuaScript,
        keys: Sequence[str],
        args: Sequence[object],
        *,
        durable: bool = False,
    ) -> Any:
        link = await self._route(keys[0])
        try:
            return await link.evalsha(script, keys, args, durable=durable)
        except MovedError as moved:
            self._moved(moved)
            return await self._follow(moved).evalsha(script, keys, args, durable=durable)
        except AskError as ask:
            return await self._follow(ask).evalsha(script, keys, args, durable=durable, asking=True)
        except _NEEDS_REFRESH:
            self._stale = True
            raise

    async def command(self, key: str, *args: object) -> Any:
        """One plain command on the master of `key`'s slot."""
        link = await self._route(key)
        try:
            return await link.call(*args)
        except MovedError as moved:
            self._moved(moved)
            return await self._follow(moved).call(*args)
        except _NEEDS_REFRESH:
            self._stale = True
            raise

    async def masters(self) -> list[Address]:
        """The masters of the current map (refreshed first if stale)."""
        await self._fresh_map()
        return sorted({a for a in self._slots if a is not None})

    def node_of(self, key: str) -> str:
        """`host:port` of the master serving `key`'s slot in the current map ("" before one)."""
        if not self._slots:
            return ""
        address = self._slots[key_slot(key.encode())]
        return "" if address is None else f"{address[0]}:{address[1]}"

    async def durability(self, within: float) -> list[ShardDurability]:
        """Each master's (of the current map) durability, read again when old, waiting at most
        `within`; a master that does not answer in time is reported as last known."""
        if not self._slots:
            async with asyncio.timeout(within):
                await self._fresh_map()
        elif self._stale:
            self._refresh_soon()
        masters = sorted({a for a in self._slots if a is not None})
        states = await asyncio.gather(*(self._link(a).durability(within) for a in masters))
        return [state for state in states if state is not None]

    async def _route(self, key: str) -> ScriptPipeline:
        slots = self._slots
        if not slots:
            await self._fresh_map()
            slots = self._slots
        elif self._stale:
            self._refresh_soon()  # meanwhile, the map as it is: most of it is still right
        address = slots[key_slot(key.encode())]
        if address is None:
            self._stale = True
            raise ClusterDownError("The cluster serves no node for this slot")
        return self._link(address)

    def _link(self, address: Address) -> ScriptPipeline:
        link = self._links.get(address)
        if link is None:
            link = self._links[address] = self._make_link(address)
        return link

    def _follow(self, redirect: AskError) -> ScriptPipeline:
        return self._link((redirect.host, redirect.port))

    def _moved(self, moved: MovedError) -> None:
        if self._slots:
            self._slots[moved.slot_id] = (moved.host, moved.port)
        self._stale = True

    async def _fresh_map(self) -> None:
        task = self._refresh_soon()
        if task is not None:
            await asyncio.shield(task)

    def _refresh_soon(self) -> asyncio.Task[None] | None:
        """The refresh under way, or a new one; None when the map is younger than the gap."""
        loop = asyncio.get_running_loop()
        task = self._refreshing
        if task is not None and not task.done() and task.get_loop() is loop:
            return task
        if self._slots and loop.time() - self._refreshed_at < _REFRESH_GAP:
            return None
        task = self._refreshing = loop.create_task(self._refresh())
        task.add_done_callback(_consume)
        return task

    async def _refresh(self) -> None:
        """Ask the known masters and the startup nodes for the map, all at once; the first
        answer wins."""
        loop = asyncio.get_running_loop()
        self._refreshed_at = loop.time()
        known = sorted({a for a in self._slots if a is not None})
        candidates = [*known, *(a for a in self._startup if a not in known)]
        asks = [loop.create_task(self._ask_slots(a)) for a in candidates]
        errors: list[str] = []
        try:
            for ask in asyncio.as_completed(asks, timeout=self._timeout):
                try:
                    self._slots, self._stale = await ask, False
                    return
                except (RedisConnectionError, RedisTimeoutError) as exc:
                    errors.append(str(exc))
        except TimeoutError as exc:
            raise RedisTimeoutError("Timeout asking the cluster for its slots") from exc
        finally:
            for ask in asks:  # the slower ones end within their own timeouts, unread
                ask.add_done_callback(_consume)
        raise RedisConnectionError("No cluster node answered: " + "; ".join(errors))

    async def _ask_slots(self, address: Address) -> list[Address | None]:
        try:
            reply = await self._link(address).call("CLUSTER", "SLOTS")
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise type(exc)(f"{address[0]}:{address[1]}: {exc}") from exc
        slots: list[Address | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
        for slot, owner in parse_cluster_slots(reply, address).items():
            slots[slot] = owner
        return slots

    async def close(self) -> None:
        task, self._refreshing = self._refreshing, None
        if task is not None and not task.done():
            task.cancel()
        links, self._links = list(self._links.values()), {}
        for link in links:
            await link.close()
