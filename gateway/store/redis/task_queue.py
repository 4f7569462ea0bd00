"""The Redis store's task queue: a Stream with a consumer group that brings workers candidates.

`XREADGROUP` delivers new entries (blocking on a connection of its own, never on the request
path's), `XAUTOCLAIM` hands over the entries of workers that stopped touching their tasks (idle
at least one lease: the claim and touch scripts reset an entry's idle time whenever they set
its lease), and `task_claim.lua` decides on each: it re-checks the task's status and lease. An
entry is acknowledged and deleted when its task reaches a terminal state (`task_common.lua`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.typing import KeyT, StreamIdT

from gateway.store.ledger_ids import refund_id
from gateway.store.redis.codec import decode_task as _task
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import TASK_GROUP, RedisKeys
from gateway.store.tasks import WORKER_LOST, TaskRecord, worker_lost_error

if TYPE_CHECKING:
    from gateway.store.redis.scripts import Scripts

__all__ = ["RedisTaskQueueArea"]

_RECLAIM_EVERY = 1.0
"""A waiting claim blocks on the stream this long at most, then looks for expired leases."""
_CLAIM_BATCH = 16

_encoder = msgspec.msgpack.Encoder()


class RedisTaskQueueArea:
    """Claiming tasks for `RedisStore`'s workers (a mixin: the store has the clients)."""

    keys: RedisKeys
    url: str
    _socket_timeout: float
    _connect_timeout: float
    _group_ready = False
    _queue_client: Redis | None = None
    """For blocking XREADGROUPs only: a wait never holds a connection others need."""

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis: ...
        @property
        def _s(self) -> Scripts: ...
        async def _task_script(
            self,
            script: AsyncScript,
            task_id: str,
            args: Sequence[Any],
            more_keys: Sequence[str] = (),
        ) -> Any: ...
        def _retention_keys(self) -> tuple[str]: ...
        def _retention_args(self) -> tuple[str, int]: ...

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
        while True:
            task = await self._reclaim(worker_id, lease_seconds, max_attempts)
            if task is not None:
                return task
            entries = await self._read_new(worker_id, min(deadline - loop.time(), _RECLAIM_EVERY))
            for entry, task_id in entries:
                task = await self._claim(entry, task_id, worker_id, lease_seconds, max_attempts)
                if task is not None:
                    return task
            if not entries and loop.time() >= deadline:
                return None

    async def task_queue_depth(self) -> int:
        with store_errors:
            return int(await self.client.scard(self.keys.tasks_queued()))

    async def _claim(
        self, entry: bytes, task_id: str, worker_id: str, lease_seconds: float, max_attempts: int
    ) -> TaskRecord | None:
        res = await self._task_script(
            self._s.task_claim,
            task_id,
            (
                entry,
                worker_id,
                lease_seconds,
                max_attempts,
                refund_id(task_id),
                WORKER_LOST,
                _encoder.encode(worker_lost_error()),
                *self._retention_args(),
            ),
            self._retention_keys(),
        )
        return _task(res[1]) if res[0] == b"claimed" else None

    async def _reclaim(
        self, worker_id: str, lease_seconds: float, max_attempts: int
    ) -> TaskRecord | None:
        """The entries idle for a lease (their workers stopped touching them), oldest first."""
        await self._ensure_group()
        queue, start = self.keys.task_queue(), "0-0"
        idle_ms = max(0, int(lease_seconds * 1000))
        while True:
            try:
                with store_errors:
                    res: Any = await self.client.xautoclaim(
                        queue, TASK_GROUP, worker_id, idle_ms, start, _CLAIM_BATCH
                    )
            except ResponseError as exc:
                self._lost_group(exc)
                return None
            cursor, entries = res[0], [(e, f) for e, f in res[1] if f]  # deleted: no fields
            for i, (entry, fields) in enumerate(entries):
                task_id = fields[b"task"].decode()
                task = await self._claim(entry, task_id, worker_id, lease_seconds, max_attempts)
                if task is not None:
                    # XAUTOCLAIM took the rest too: leave them as idle as they were, so any
                    # worker (this one included) finds them at once.
                    if rest := [e for e, _ in entries[i + 1 :]]:
                        with store_errors:
                            await self.client.xclaim(
                                queue, TASK_GROUP, worker_id, 0, rest, idle=idle_ms, justid=True
                            )
                    return task
            if cursor in (b"0-0", "0-0"):
                return None
            start = cursor

    async def _read_new(self, worker_id: str, block_seconds: float) -> list[tuple[bytes, str]]:
        """Entries never delivered (at most one), waiting up to `block_seconds` for one."""
        await self._ensure_group()
        # BLOCK 0 would wait forever: no wait left means no BLOCK at all.
        block = max(1, int(block_seconds * 1000)) if block_seconds > 0 else None
        streams: dict[KeyT, StreamIdT] = {self.keys.task_queue(): ">"}
        try:
            with store_errors:
                res: Any = await self._queue().xreadgroup(
                    TASK_GROUP, worker_id, streams, count=1, block=block
                )
        except ResponseError as exc:
            self._lost_group(exc)
            return []
        return [
            (entry, fields[b"task"].decode()) for _, items in res or () for entry, fields in items
        ]

    async def _ensure_group(self) -> None:
        if self._group_ready:
            return
        try:
            with store_errors:
                # From id 0: tasks enqueued before any worker existed are delivered too.
                await self.client.xgroup_create(
                    self.keys.task_queue(), TASK_GROUP, id="0", mkstream=True
                )
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def _lost_group(self, exc: ResponseError) -> None:
        """NOGROUP: the stream is gone (a flushed Redis); the group is made again next time."""
        if "NOGROUP" not in str(exc):
            raise exc
        self._group_ready = False

    def _queue(self) -> Redis:
        if self._queue_client is None:
            self._queue_client = Redis.from_url(
                self.url,
                decode_responses=False,
                socket_timeout=_RECLAIM_EVERY + self._socket_timeout,  # a BLOCK is that long
                socket_connect_timeout=self._connect_timeout,
                # One quick retry for a connection the server closed, as the store's own pool.
                retry=Retry(
                    ExponentialWithJitterBackoff(base=0.01, cap=0.05),
                    1,
                    supported_errors=(RedisConnectionError,),
                ),
            )
        return self._queue_client

    async def _close_task_queue(self) -> None:
        client, self._queue_client, self._group_ready = self._queue_client, None, False
        if client is not None:
            await client.aclose()
