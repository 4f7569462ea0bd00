"""The Redis store's task queue: one Stream per shard (`keys.py`), each in a slot of its own, so
that on a cluster the workers spread over the masters. A tenant's tasks go to one shard.

A task's state is in its tenant's slot and its queue entry in its shard's, so no script does
both (docs/store.md, "The task queue"):

1. `task_confirm.lua` marks the task queued and puts it in its tenant's open tasks
   (`tasks_open`, by when to check it next); then `queue_add.lua` adds its entry to the shard,
   idempotent per task (the shard's `entries` hash), so a retried confirm adds none twice.
2. Workers read the shards (`XREADGROUP`, rotating over them so that each gets its turn) and
   take over the entries of workers that stopped (`XAUTOCLAIM`, idle for a lease);
   `task_claim.lua`, in the tenant's slot, alone decides whether an entry gives a claim: a task
   already running under a live lease is busy (the entry comes back when the lease would end),
   an ended, unknown or unconfirmed one is gone (its entry is dropped). A claim whose answer
   is not sure (its WAIT unacknowledged) is taken back at once (`task_unclaim.lua`), so a
   replica's outage costs no attempt.
3. A task that ends (finalize, cancel, out of attempts) leaves its tenant's open tasks in the
   same script; its entry is dropped after (`queue_drop.lua`). An entry left behind (that step
   failed) is met by a worker later, found gone, and dropped then.
4. The reconcile (`task_queue_upkeep.py`, run by the claiming workers every
   `RECONCILE_EVERY` seconds, by one process of the deployment at a time) walks the tenants
   and adds the entry of every open task due for a check (queued for `RECHECK_SECONDS`, or
   running past its lease): a no-op when it is there, the repair when a crash or a failover lost it.

On one server (or behind Sentinel) a waiting worker blocks on all shards in one `XREADGROUP`
on a connection of its own; on a cluster a read spans one slot, so it polls the shards every
`POLL_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from redis.asyncio import Redis, RedisCluster
from redis.exceptions import ResponseError

from gateway.errors import StoreUnavailable
from gateway.store.ledger_ids import refund_id
from gateway.store.redis.codec import decode_task as _task
from gateway.store.redis.codec import text
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import TASK_GROUP, RedisKeys
from gateway.store.redis.tasks import RECHECK_SECONDS
from gateway.store.tasks import WORKER_LOST, TaskRecord, worker_lost_error

if TYPE_CHECKING:
    from gateway.store.redis.connect import Connections

__all__ = ["POLL_SECONDS", "RedisTaskQueueArea"]

_RECLAIM_EVERY = 1.0
"""A process looks for expired leases at most this often (or each half lease, if shorter), and
a waiting claim at least this often."""
POLL_SECONDS = 0.2
"""On a cluster, how often a waiting claim reads the shards again."""
_CLAIM_BATCH = 10
_RECLAIM_STEPS = 10

_encoder = msgspec.msgpack.Encoder()
_lost_error = _encoder.encode(worker_lost_error())

Entry = tuple[int, bytes, dict[bytes, bytes]]
"""(shard, entry id, fields) of a queue entry read."""


class RedisTaskQueueArea:
    """Claiming tasks for `RedisStore`'s workers (a mixin: the store has the clients)."""

    keys: RedisKeys
    _groups: set[int]
    _turn: int
    _reclaim_after: float
    _capabilities: dict[str, str]

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis | RedisCluster: ...
        @property
        def _connections(self) -> Connections: ...
        async def _eval_hot(
            self, name: str, keys: Sequence[str], args: Sequence[Any], *, durable: bool = False
        ) -> Any: ...
        def _retention_ms(self) -> int: ...
        def _remember(self, task_id: str, capability: str) -> None: ...
        async def _maybe_reconcile(self, worker_id: str) -> None: ...

    async def claim_task(
        self,
        worker_id: str,
        *,
        lease_seconds: float,
        wait_seconds: float = 0.0,
        max_attempts: int = 3,
    ) -> TaskRecord | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        claim = (worker_id, lease_seconds, max_attempts)
        # Where one blocking read covers every shard (not a cluster), a claim that may wait
        # makes only that read: it answers at once when a shard has an entry, and an idle
        # worker sends one command a wait instead of one per shard.
        blocks = wait_seconds > 0 and self._connections.blocking(_RECLAIM_EVERY) is not None
        while True:
            now = loop.time()
            if now >= self._reclaim_after:
                # Vanished workers' entries are looked for at most this often (per process,
                # whatever its claiming loops): a lease's half, up to `_RECLAIM_EVERY`.
                self._reclaim_after = now + min(_RECLAIM_EVERY, lease_seconds / 2)
                await self._maybe_reconcile(worker_id)
                task = await self._reclaim(*claim)
                if task is not None:
                    # A vanished worker seldom leaves one task: the next claim looks again.
                    self._reclaim_after = now
                    return task
            if not blocks:
                task = await self._take_new(*claim)
                if task is not None:
                    return task
            left = deadline - loop.time()
            if left <= 0:
                return None
            wait = min(left, max(0.001, self._reclaim_after - loop.time()))
            task = await self._wait_new(wait, *claim)
            if task is not None:
                return task

    # Steps in the shard's slot -------------------------------------------------------------

    async def _enqueue(self, tenant: str, task_id: str, capability: str) -> int:
        """The task's entry in its shard (1 when it was added, 0 when it was there)."""
        shard = self.keys.shard_of(tenant)
        res = await self._eval_hot(
            "queue_add",
            (self.keys.task_queue(shard), self.keys.task_entries(shard)),
            (TASK_GROUP, task_id, tenant, capability),
        )
        self._groups.add(shard)
        return int(res[0])

    async def _drop_entry(self, tenant: str, task_id: str, entry: bytes = b"") -> None:
        """Drop a task's entry (its own, or `entry`); best effort: an entry left behind is
        met later, found gone and dropped then."""
        shard = self.keys.shard_of(tenant)
        await self._drop(shard, task_id, entry)

    async def _drop(self, shard: int, task_id: str, entry: bytes = b"") -> None:
        k = self.keys
        with contextlib.suppress(StoreUnavailable):
            await self._eval_hot(
                "queue_drop",
                (k.task_queue(shard), k.task_entries(shard)),
                (TASK_GROUP, task_id, entry),
            )

    # Claiming ------------------------------------------------------------------------------

    def _order(self) -> list[int]:
        """Every shard, starting one further each time: each shard gets its turn first."""
        n = self.keys.shards
        self._turn = (self._turn + 1) % n
        return [(self._turn + i) % n for i in range(n)]

    async def _claim(
        self, entry: Entry, worker_id: str, lease_seconds: float, max_attempts: int
    ) -> TaskRecord | None:
        shard, entry_id, fields = entry
        task_id = fields.get(b"task", b"").decode()
        tenant = fields.get(b"tenant")
        if not task_id or tenant is None:  # not an entry of this layout
            await self._drop(shard, task_id, entry_id)
            return None
        tenant_name = tenant.decode()
        capability = fields.get(b"capability", b"").decode()
        k = self.keys
        token = secrets.token_hex(8)
        for _ in range(2):
            try:
                res = await self._eval_hot(
                    "task_claim",
                    (
                        k.task(tenant_name, task_id),
                        k.tasks_open(tenant_name),
                        k.task_expiry(tenant_name),
                        *k.money(tenant_name),
                        *k.task_index_block(tenant_name, capability),
                        k.callbacks_due(tenant_name),
                    ),
                    (
                        worker_id,
                        lease_seconds,
                        max_attempts,
                        refund_id(task_id),
                        WORKER_LOST,
                        _lost_error,
                        self._retention_ms(),
                        capability,
                        RECHECK_SECONDS,
                        token,
                    ),
                    durable=True,
                )
            except StoreUnavailable:
                await self._unclaim(
                    entry, worker_id, tenant_name, task_id, capability, token, lease_seconds
                )
                raise
            if res[0] != b"capability":
                break
            capability = text(res[1])
        kind = res[0]
        if kind == b"claimed":
            task = _task(res[1])
            if task is not None:
                self._remember(task_id, task.capability)
            return task
        if kind == b"busy":  # back when its lease would end, to whoever looks then
            idle = max(0, int(lease_seconds * 1000) - int(res[1]))
            with store_errors:
                await self.client.xclaim(
                    k.task_queue(shard),
                    TASK_GROUP,
                    worker_id,
                    0,
                    [entry_id],
                    idle=idle,
                    justid=True,
                )
        elif kind in (b"gone", b"failed"):
            await self._drop(shard, task_id, entry_id)
        return None

    async def _unclaim(
        self,
        entry: Entry,
        worker_id: str,
        tenant: str,
        task_id: str,
        capability: str,
        token: str,
        lease_seconds: float,
    ) -> None:
        """A claim whose answer was not sure (a WAIT the replicas did not acknowledge, a lost
        connection) is taken back, so that it costs the task no attempt: during a replica's
        outage every claim would fail so, and the task end `worker_lost` after
        `max_attempts` leases. Its entry is made idle for a lease, so the next look takes it
        at once. Best effort: a claim this cannot take back counts, as before."""
        k = self.keys
        with contextlib.suppress(StoreUnavailable):
            back = await self._eval_hot(
                "task_unclaim",
                (
                    k.task(tenant, task_id),
                    k.tasks_open(tenant),
                    k.task_expiry(tenant),
                    *k.task_index_block(tenant, capability),
                ),
                (token, self._retention_ms(), RECHECK_SECONDS),
            )
            if back:
                shard, entry_id, _ = entry
                with store_errors:
                    await self.client.xclaim(
                        k.task_queue(shard),
                        TASK_GROUP,
                        worker_id,
                        0,
                        [entry_id],
                        idle=max(0, int(lease_seconds * 1000)),
                        justid=True,
                    )

    async def _reclaim(
        self, worker_id: str, lease_seconds: float, max_attempts: int
    ) -> TaskRecord | None:
        """The entries idle for a lease (their workers stopped touching them), shard by shard:
        up to `_RECLAIM_STEPS` XAUTOCLAIMs of `_CLAIM_BATCH` per shard. The entries taken but
        not claimed go back as idle as they were, so any worker finds them at once."""
        idle_ms = max(0, int(lease_seconds * 1000))
        k = self.keys
        for shard in self._order():
            await self._ensure_group(shard)
            queue, start = k.task_queue(shard), "0-0"
            for _ in range(_RECLAIM_STEPS):
                try:
                    with store_errors:
                        res: Any = await self.client.xautoclaim(
                            queue, TASK_GROUP, worker_id, idle_ms, start, _CLAIM_BATCH
                        )
                except ResponseError as exc:
                    self._lost_group(shard, exc)
                    break
                start = res[0]
                entries = [(e, f) for e, f in res[1] if f]  # deleted since: no fields
                for i, (entry_id, fields) in enumerate(entries):
                    task = await self._claim(
                        (shard, entry_id, fields), worker_id, lease_seconds, max_attempts
                    )
                    if task is not None:
                        if rest := [e for e, _ in entries[i + 1 :]]:
                            with store_errors:
                                await self.client.xclaim(
                                    queue,
                                    TASK_GROUP,
                                    worker_id,
                                    0,
                                    rest,
                                    idle=idle_ms,
                                    justid=True,
                                )
                        return task
                if start in (b"0-0", "0-0"):
                    break
        return None

    async def _take_new(
        self, worker_id: str, lease_seconds: float, max_attempts: int
    ) -> TaskRecord | None:
        """One entry never delivered, from the first shard (in turn) that has one."""
        k = self.keys
        for shard in self._order():
            await self._ensure_group(shard)
            try:
                with store_errors:
                    res: Any = await self.client.xreadgroup(
                        TASK_GROUP, worker_id, {k.task_queue(shard): ">"}, count=1
                    )
            except ResponseError as exc:
                self._lost_group(shard, exc)
                continue
            for _, items in res or ():
                for entry_id, fields in items:
                    task = await self._claim(
                        (shard, entry_id, fields), worker_id, lease_seconds, max_attempts
                    )
                    if task is not None:
                        return task
        return None

    async def _wait_new(
        self, seconds: float, worker_id: str, lease_seconds: float, max_attempts: int
    ) -> TaskRecord | None:
        """Wait up to `seconds` for a new entry: blocking on every shard at once where one
        command may (not a cluster), else a pause before the next look."""
        blocking = self._connections.blocking(_RECLAIM_EVERY)
        if blocking is None:
            await asyncio.sleep(min(seconds, POLL_SECONDS))
            return None
        k = self.keys
        order = self._order()
        for shard in order:
            await self._ensure_group(shard)
        shard_of = {k.task_queue(s).encode(): s for s in order}
        # BLOCK 0 would wait forever: at least a millisecond.
        block = max(1, int(seconds * 1000))
        try:
            with store_errors:
                res: Any = await blocking.xreadgroup(
                    TASK_GROUP,
                    worker_id,
                    {k.task_queue(s): ">" for s in order},
                    count=1,
                    block=block,
                )
        except ResponseError as exc:
            self._groups.clear()
            if "NOGROUP" not in str(exc):
                raise
            return None
        entries = [
            (shard_of[stream], entry_id, fields)
            for stream, items in res or ()
            for entry_id, fields in items
        ]
        found = None
        for entry in entries:
            if found is None:
                found = await self._claim(entry, worker_id, lease_seconds, max_attempts)
            else:  # more than one stream answered: the rest go to whoever looks next
                with store_errors:
                    await self.client.xclaim(
                        k.task_queue(entry[0]),
                        TASK_GROUP,
                        worker_id,
                        0,
                        [entry[1]],
                        idle=int(lease_seconds * 1000),
                        justid=True,
                    )
        return found

    async def _ensure_group(self, shard: int) -> None:
        """The shard's stream and consumer group, made once (by whoever comes first)."""
        if shard in self._groups:
            return
        try:
            with store_errors:
                # From id 0: tasks queued before any worker existed are delivered too.
                await self.client.xgroup_create(
                    self.keys.task_queue(shard), TASK_GROUP, id="0", mkstream=True
                )
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._groups.add(shard)

    def _lost_group(self, shard: int, exc: ResponseError) -> None:
        """NOGROUP: the stream is gone (a flushed Redis); the group is made again next time."""
        if "NOGROUP" not in str(exc):
            raise exc
        self._groups.discard(shard)

    def _forget_task_queue(self) -> None:
        self._groups = set()
