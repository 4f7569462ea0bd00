"""What one Redis primary's replication can promise now, kept fresh per primary.

A money write is answered once the replicas that keep up with its primary have it (`WAIT`),
at most the store's `wait_replicas`: waiting for one that is gone (killed, or the promoted
replica of a dead master, which has none until that node returns) would fail every money write
for as long as it is gone. So each primary's replicas are counted from `INFO replication`: online,
and acknowledging within `MAX_LAG` seconds (replicas acknowledge every second, so a paused or
cut-off one drops out within about two). The count is read when first needed, again when it is
older than `REFRESH_SECONDS` (by the next money write, health check or scrape, in the
background), at once after each reconnect, and lowered to what a `WAIT` got when it fell short.

With fewer replicas than `wait_replicas` the primary's durability is *reduced*: with none, a
money write rests on the primary's own AOF, which keeps it through a crash only with
`appendfsync always` (read with `CONFIG GET`, reported, not enforced; Redis 7.0 has no
`WAITAOF`). Each change is one log line, `store_durability_reduced` or
`store_durability_restored`, and `durability()` tells health and metrics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import RedisError

from gateway.logging import get_logger
from gateway.store.durability import ShardDurability

__all__ = ["MAX_LAG", "REFRESH_SECONDS", "ReplicaWatch", "aof_policy", "keeping_up"]

REFRESH_SECONDS = 1.0
MAX_LAG = 1
"""Seconds since a replica's last acknowledgement (INFO's `lag`) that still count as keeping up."""
FIRST_LOOK_SECONDS = 0.25
"""How long a money write waits for the first count of a primary (else it waits for all)."""

_log = get_logger("gateway.store.redis.replication")

Ask = Callable[[], Awaitable[tuple[bytes, Any]]]
"""`INFO replication` and `CONFIG GET append*`, as the primary answers them (the second may be
an error reply)."""


def keeping_up(info: bytes | str) -> int:
    """Replicas of `INFO replication` that are online and acknowledged within `MAX_LAG` s."""
    text = info.decode() if isinstance(info, bytes) else info
    count = 0
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if not (name.startswith("slave") and name[5:].isdigit()):
            continue
        fields = dict(part.partition("=")[::2] for part in value.split(","))
        lag = fields.get("lag", "")
        if fields.get("state") == "online" and lag.lstrip("-").isdigit() and int(lag) <= MAX_LAG:
            count += 1
    return count


def aof_policy(reply: Any) -> str:
    """`always`, `everysec` or `no` from `CONFIG GET append*`; `off` without AOF; `unknown`
    when CONFIG was refused."""
    if not isinstance(reply, list):
        return "unknown"
    pairs = iter(v.decode() if isinstance(v, bytes) else str(v) for v in reply)
    config = dict(zip(pairs, pairs, strict=False))
    if config.get("appendonly") != "yes":
        return "off" if "appendonly" in config else "unknown"
    return config.get("appendfsync", "unknown")


class ReplicaWatch:
    """The replicas one primary (`shard`) has, for its money writes to wait for."""

    def __init__(self, shard: str, wanted: int, ask: Ask) -> None:
        self.shard = shard
        self.wanted = wanted
        self._ask = ask
        self._replicas: int | None = None
        self._aof = "unknown"
        self._read_at = float("-inf")
        self._fresh = False
        """False until counted on the current connection (a reconnect may be a new primary)."""
        self._reading: asyncio.Task[None] | None = None
        self._reduced = False

    def reconnected(self) -> None:
        """The primary's connection was made anew: count again before the next money write."""
        self._fresh = False

    def replicas_now(self) -> int | None:
        """`replicas_to_wait` without waiting, when the count is fresh (None: it is not)."""
        if not self._fresh or self._replicas is None:
            return None
        if asyncio.get_running_loop().time() - self._read_at >= REFRESH_SECONDS:
            self._start_read()
        return min(self.wanted, self._replicas)

    async def replicas_to_wait(self) -> int:
        """How many replicas the next money write waits for."""
        if not self._fresh:
            await self._read(FIRST_LOOK_SECONDS)
        elif asyncio.get_running_loop().time() - self._read_at >= REFRESH_SECONDS:
            self._start_read()
        if not self._fresh or self._replicas is None:
            return self.wanted  # not known: the promise as configured
        return min(self.wanted, self._replicas)

    def fell_short(self, acked: int) -> None:
        """A `WAIT` got `acked` acknowledgements, fewer than it asked: count that many until
        the next reading (a second on)."""
        self._replicas = acked
        self._read_at = asyncio.get_running_loop().time()
        self._note()

    async def durability(self, within: float) -> ShardDurability:
        """The shard's state, read again first (waiting at most `within`) when it is old."""
        stale = asyncio.get_running_loop().time() - self._read_at >= REFRESH_SECONDS
        if stale or not self._fresh:
            await self._read(within)
        return ShardDurability(
            shard=self.shard, replicas=self._replicas, wanted=self.wanted, aof=self._aof
        )

    async def _read(self, within: float) -> None:
        # `wait` neither cancels the reading at its timeout nor when its caller is cancelled:
        # the others may still be waiting for it.
        await asyncio.wait((self._start_read(),), timeout=within)

    def _start_read(self) -> asyncio.Task[None]:
        loop = asyncio.get_running_loop()
        task = self._reading
        if task is None or task.done() or task.get_loop() is not loop:
            task = self._reading = loop.create_task(self._refresh())
            task.add_done_callback(_consume)
        return task

    async def _refresh(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            info, config = await self._ask()
        except (RedisError, OSError):
            return  # the primary does not answer: what was known stays (its calls fail anyway)
        self._replicas, self._aof = keeping_up(info), aof_policy(config)
        self._read_at, self._fresh = loop.time(), True
        self._note()

    def _note(self) -> None:
        reduced = self._replicas is not None and self._replicas < self.wanted
        if reduced == self._reduced:
            return
        self._reduced = reduced
        fields = {"shard": self.shard, "replicas": self._replicas, "wanted": self.wanted}
        if reduced:
            _log.warning("store_durability_reduced", aof=self._aof, **fields)
        else:
            _log.info("store_durability_restored", **fields)


def _consume(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
