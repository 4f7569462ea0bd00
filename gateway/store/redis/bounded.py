"""redis-py's asyncio clients (one server, or a cluster) with one deadline per command or pipeline.

A call into a stalled Redis must fail within the store's bound (its socket timeout, 2 s by
default) however it fails: redis-py alone can take longer, waiting first for a pooled
connection and then for the reply (on a fresh connection, for its handshake and then the
reply), so a client would wait twice the bound or more. Here the caller waits for the call
at most `bound` seconds, the pool wait included, then gets `TimeoutError` (the store maps it
to `StoreUnavailable`). The call runs as a task of its own and is cancelled at the deadline
rather than the caller: redis-py drops the connection it was using, and however its nested
timeouts take that cancellation (on Python 3.11 one due at the same moment can swallow it), the
caller is answered on time. On a cluster the deadline also covers what redis-py does
around a command: finding the slot map again after a node failed, following a redirection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline

__all__ = ["BoundedClusterPipeline", "BoundedPipeline", "BoundedRedis", "BoundedRedisCluster"]

T = TypeVar("T")


async def _within(call: Coroutine[Any, Any, T], bound: float) -> T:
    task = asyncio.ensure_future(call)
    try:
        done, _ = await asyncio.wait((task,), timeout=bound)
    except BaseException:  # the caller was cancelled: so is its call
        task.cancel()
        raise
    if done:
        return task.result()
    task.cancel()
    task.add_done_callback(_consume)
    raise TimeoutError(f"Redis did not answer within {bound:g} s")


def _consume(task: asyncio.Future[Any]) -> None:
    """The abandoned call's outcome is nobody's: read it so that asyncio does not warn."""
    with contextlib.suppress(BaseException):
        task.exception()


class BoundedRedis(Redis):
    """`Redis` whose every command answers or fails within `bound` seconds."""

    bound: float = 2.0

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        call = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        return await _within(call, self.bound)

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        pipe = BoundedPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
        pipe.bound = self.bound
        return pipe


class BoundedPipeline(Pipeline):
    """A pipeline (or transaction) whose `execute` answers or fails within `bound` seconds."""

    bound: float = 2.0

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        return await _within(super().execute(raise_on_error), self.bound)


class BoundedRedisCluster(RedisCluster):
    """`RedisCluster` whose every command answers or fails within `bound` seconds."""

    bound: float = 2.0

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        return await _within(super().execute_command(*args, **kwargs), self.bound)

    def pipeline(
        self, transaction: Any | None = None, shard_hint: Any | None = None
    ) -> ClusterPipeline:
        pipe = BoundedClusterPipeline(self, transaction)  # type: ignore[abstract]
        pipe.bound = self.bound
        return pipe


class BoundedClusterPipeline(ClusterPipeline):
    """A cluster pipeline whose `execute` answers or fails within `bound` seconds."""

    bound: float = 2.0

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        return await _within(super().execute(raise_on_error, allow_redirections), self.bound)
