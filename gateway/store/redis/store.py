"""`RedisStore`: the store on Redis, each atomic operation one Lua script (one round trip), on
one server, a Redis Cluster or a primary behind Sentinel (`target.py`).

Scripts use Redis server time, so gateway replicas sharing one Redis agree on every bucket,
lease and hold; `codec.py` decodes what they return. Connection failures and timeouts become
`StoreUnavailable` at this boundary, in one place (`errors.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.commands.core import AsyncScript

from gateway.store.durability import ShardDurability
from gateway.store.redis.admission import RedisAdmissionArea
from gateway.store.redis.api_keys import RedisKeyArea
from gateway.store.redis.artifacts import RedisArtifactArea
from gateway.store.redis.callbacks import RedisCallbackArea
from gateway.store.redis.cluster_pipeline import ClusterScriptPipeline
from gateway.store.redis.connect import Connections
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys
from gateway.store.redis.responses import RedisResponseArea
from gateway.store.redis.scripts import PipelinedScripts, Scripts, Source, script_source
from gateway.store.redis.target import RedisTarget, parse_target
from gateway.store.redis.task_index import RedisTaskIndexArea
from gateway.store.redis.task_queue import RedisTaskQueueArea
from gateway.store.redis.task_queue_upkeep import RECONCILE_EVERY, RedisTaskQueueUpkeepArea
from gateway.store.redis.tasks import RedisTaskArea
from gateway.store.redis.tenants import Registrations, TenantWalk
from gateway.store.redis.wallet import RedisWalletArea

__all__ = ["RedisStore"]


class RedisStore(
    RedisKeyArea,
    RedisAdmissionArea,
    RedisWalletArea,
    RedisTaskArea,
    RedisTaskQueueArea,
    RedisTaskQueueUpkeepArea,
    RedisTaskIndexArea,
    RedisArtifactArea,
    RedisCallbackArea,
    RedisResponseArea,
):
    """The `gateway.store.base.Store` on Redis.

    Each area is a module of its own, mixed in here: keys (`api_keys.py`), admission
    (`admission.py`), wallet and ledger (`wallet.py`), tasks (`tasks.py`; their queue:
    `task_queue.py`, its upkeep `task_queue_upkeep.py`; their listing and retention:
    `task_index.py`), artifacts (`artifacts.py`), stored responses (`responses.py`). This
    class opens and closes the clients (`connect.py`) and runs their scripts (`_eval`,
    `_eval_hot`), with Redis's errors mapped in one place (`errors.py`).

    The request path's scripts and every script that moves money go through the pipelined
    client (`_eval_hot`): a fraction of redis-py's CPU per call, sent once, and able to wait
    for replicas on the same connection (`durable`). `open()` does not contact Redis, so the
    gateway can start while Redis is briefly away; `ping()` tells. `prefix` namespaces every
    key (several gateways or test runs, one Redis).
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
        source: Source = script_source,
    ) -> None:
        self.url = url
        self.target: RedisTarget = parse_target(url)
        self.keys = RedisKeys(prefix, self.target.shards)
        self._socket_timeout, self._connect_timeout = socket_timeout, connect_timeout
        self._retries, self._max_connections = retries, max_connections
        self._source = source
        self._conn: Connections | None = None
        self._scripts: Scripts | None = None
        self._hot = PipelinedScripts(source)
        # The areas' own state (see each module): what this process learned or walks.
        self._capabilities: dict[str, str] = {}
        self._registered = Registrations()
        self._unconfirmed_walk, self._sweep_walk = TenantWalk(), TenantWalk()
        self._reconcile_walk = TenantWalk()
        self._callback_walk = TenantWalk()
        self._groups: set[int] = set()
        self._turn = 0
        self._reclaim_after = 0.0
        self._reconciled_at = -RECONCILE_EVERY

    async def open(self) -> None:
        if self._conn is None:
            conn = Connections(
                self.target,
                socket_timeout=self._socket_timeout,
                connect_timeout=self._connect_timeout,
                retries=self._retries,
                max_connections=self._max_connections,
            )
            self._conn, self._scripts = conn, Scripts(conn.client, self._source)

    async def close(self) -> None:
        conn, self._conn, self._scripts = self._conn, None, None
        self._forget_task_queue()
        if conn is not None:
            await conn.close()

    async def ping(self) -> bool:
        if self._conn is None:
            return False
        try:
            return bool(await self._conn.client.ping())
        except Exception:
            return False

    async def durability(self, within: float) -> list[ShardDurability]:
        if self._conn is None:
            return []
        hot = self._conn.hot
        try:
            if isinstance(hot, ClusterScriptPipeline):
                return await hot.durability(within)
            state = await hot.durability(within)
        except Exception:
            return []
        return [] if state is None else [state]

    def node_of(self, tenant: str) -> str:
        hot = self._conn.hot if self._conn is not None else None
        if isinstance(hot, ClusterScriptPipeline):
            return hot.node_of(self.keys.wallet(tenant))
        return ""

    @property
    def client(self) -> Redis | RedisCluster:
        """The open redis-py client (for maintenance and tests); RuntimeError before `open()`."""
        return self._connections.client

    @property
    def _connections(self) -> Connections:
        if self._conn is None:
            raise RuntimeError("RedisStore is not open")
        return self._conn

    @property
    def _s(self) -> Scripts:
        if self._scripts is None:
            raise RuntimeError("RedisStore is not open")
        return self._scripts

    async def _eval(self, script: AsyncScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        with store_errors:
            return await script(keys=keys, args=args)

    async def _eval_hot(
        self, name: str, keys: Sequence[str], args: Sequence[Any], *, durable: bool = False
    ) -> Any:
        """A pipelined script (see `scripts.PIPELINED`); `durable`: answered once the store's
        `wait_replicas` replicas have its writes (docs/store.md, "Failover")."""
        hot = self._connections.hot
        with store_errors:
            return await hot.evalsha(getattr(self._hot, name), keys, args, durable=durable)

    async def _command_hot(self, key: str, *args: Any) -> Any:
        """One plain command through the pipelined client, on the node of `key`."""
        hot = self._connections.hot
        with store_errors:
            return await hot.command(key, *args)
