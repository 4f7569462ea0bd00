"""`RedisStore`: the store on Redis, each atomic operation one Lua script (one round trip).

Scripts use Redis server time, so gateway replicas sharing one Redis agree on every bucket,
lease and hold; `codec.py` decodes what they return. Connection failures and timeouts become
`StoreUnavailable` at this boundary, in one place (`errors.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.store.redis.admission import RedisAdmissionArea
from gateway.store.redis.api_keys import RedisKeyArea
from gateway.store.redis.artifacts import RedisArtifactArea
from gateway.store.redis.bounded import BoundedRedis
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys
from gateway.store.redis.pipeline import LuaScript, ScriptPipeline
from gateway.store.redis.scripts import Scripts, script_source
from gateway.store.redis.task_index import RedisTaskIndexArea
from gateway.store.redis.task_queue import RedisTaskQueueArea
from gateway.store.redis.tasks import RedisTaskArea
from gateway.store.redis.wallet import RedisWalletArea

__all__ = ["RedisStore"]

_PIPELINED_SCHEMES = ("redis://", "unix://")
"""URLs the hot-path pipeline serves; others (rediss://, TLS) keep redis-py for every call."""


class _HotScripts:
    """The request path's scripts, for `ScriptPipeline` (same sources as `Scripts`): a call's
    admission and its end, and a task create's steps. Through the pipeline a step is sent
    once and answered or timed out within `socket_timeout`: no pool wait, no resend."""

    __slots__ = ("admit", "release", "settle", "task_abandon", "task_confirm", "task_create")

    def __init__(self) -> None:
        self.admit = LuaScript.of(script_source("admit"))
        self.settle = LuaScript.of(script_source("settle"))
        self.release = LuaScript.of(script_source("release"))
        self.task_create = LuaScript.of(script_source("task_create"))
        self.task_confirm = LuaScript.of(script_source("task_confirm"))
        self.task_abandon = LuaScript.of(script_source("task_abandon"))


class RedisStore(
    RedisKeyArea,
    RedisAdmissionArea,
    RedisWalletArea,
    RedisTaskArea,
    RedisTaskQueueArea,
    RedisTaskIndexArea,
    RedisArtifactArea,
):
    """The `gateway.store.base.Store` on Redis (redis-py asyncio, one connection pool).

    Each area is a module of its own, mixed in here: keys (`api_keys.py`), admission
    (`admission.py`), wallet and ledger (`wallet.py`), tasks (`tasks.py`; their listing and
    retention: `task_index.py`), artifacts (`artifacts.py`). This class opens and closes the
    clients and runs their scripts (`_eval`, `_eval_hot`), with Redis's errors mapped in one
    place (`errors.py`).

    `admit`, `settle` and `release`, two of which every request makes, go through a
    `ScriptPipeline` instead: one pipelined connection, a fraction of redis-py's CPU per call.
    `open()` does not contact Redis, so the gateway can start while Redis is briefly away;
    `ping()` tells. `prefix` namespaces every key (several gateways or test runs, one Redis).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "gw:",
        socket_timeout: float = 2.0,
        connect_timeout: float = 1.0,
        retries: int = 1,
        max_connections: int = 64,
    ) -> None:
        self.url = url
        self.keys = RedisKeys(prefix)
        self._options: dict[str, Any] = {
            "decode_responses": False,
            # The call's deadline (`bounded.py`) answers the caller; redis-py's own timeout
            # ends the abandoned call (and frees its connection) soon after.
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": connect_timeout,
            # One quick retry covers a pooled connection the server closed. None after a
            # timeout: a client waits on these calls, and a second wait would double the
            # bound (the 503 it gets instead is retryable).
            "retry": Retry(
                ExponentialWithJitterBackoff(base=0.01, cap=0.05),
                retries,
                supported_errors=(RedisConnectionError,),
            ),
            # A bounded pool: a burst waits briefly for a connection instead of failing (the
            # caller waits for the wait and the reply together at most `socket_timeout`).
            "max_connections": max_connections,
            "timeout": socket_timeout,
        }
        self._client: Redis | None = None
        self._scripts: Scripts | None = None
        self._socket_timeout, self._connect_timeout = socket_timeout, connect_timeout
        self._pipeline: ScriptPipeline | None = None
        self._hot = _HotScripts()

    async def open(self) -> None:
        if self._client is None:
            pool = BlockingConnectionPool.from_url(self.url, **self._options)
            client = cast(BoundedRedis, BoundedRedis.from_pool(pool))
            client.bound = self._socket_timeout  # the pool wait and the reply, together
            self._client = client
            self._scripts = Scripts(client)
            if self.url.startswith(_PIPELINED_SCHEMES):
                self._pipeline = ScriptPipeline(
                    self.url,
                    socket_timeout=self._socket_timeout,
                    connect_timeout=self._connect_timeout,
                )

    async def close(self) -> None:
        client, self._client, self._scripts = self._client, None, None
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            await pipeline.close()
        await self._close_task_queue()
        if client is not None:
            await client.aclose()

    async def ping(self) -> bool:
        if self._client is None:
            return False
        try:
            return bool(await self._client.ping())
        except Exception:
            return False

    @property
    def client(self) -> Redis:
        """The open client (for maintenance and tests); RuntimeError before `open()`."""
        if self._client is None:
            raise RuntimeError("RedisStore is not open")
        return self._client

    @property
    def _s(self) -> Scripts:
        if self._scripts is None:
            raise RuntimeError("RedisStore is not open")
        return self._scripts

    async def _eval(self, script: AsyncScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        with store_errors:
            return await script(keys=keys, args=args)

    async def _eval_hot(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """A request-path script: through the pipeline, or redis-py when there is none."""
        pipeline = self._pipeline
        if pipeline is None:
            return await self._eval(getattr(self._s, name), keys, args)
        with store_errors:
            return await pipeline.evalsha(getattr(self._hot, name), keys, args)
