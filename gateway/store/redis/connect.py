"""The clients of one `RedisStore`, made for its target (`target.py`): one server, a cluster,
or a primary behind Sentinel. Making them does not contact Redis.

- `client`: redis-py, bounded (`bounded.py`): reads, listings, sweeps, the queue's commands
  and the scripts that do not move money. On a cluster redis-py's `RedisCluster` (it finds
  the slot map, follows redirections); behind Sentinel the primary's pool, which asks the
  sentinels where the primary is whenever it connects.
- `hot`: the pipelined script client (`pipeline.py`, or `cluster_pipeline.py`): the request
  path's scripts and every script that moves money (it can wait for replicas on the same
  connection). Behind Sentinel it asks the sentinels at each connect.
- `blocking()`: a connection of its own for the workers' blocking reads of the queue (never one
  a request waits for). None on a cluster, where a read spans one slot: workers poll there.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store.redis.bounded import BoundedRedis, BoundedRedisCluster
from gateway.store.redis.cluster_pipeline import ClusterScriptPipeline
from gateway.store.redis.pipeline import Address, ScriptPipeline
from gateway.store.redis.target import RedisTarget

__all__ = ["Connections"]


class _BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """Sentinel's pool (it follows the primary) that waits for a free connection, as the
    one-server pool does, instead of failing a burst."""


class _NewestSentinel(Sentinel):
    """Sentinel whose primary is the one named with the newest configuration epoch of all
    the sentinels that answer, not by the first that answers (redis-py's way).

    Right after a failover a sentinel that has not yet heard of it still names the old
    primary, and once that node is back (restarted, before the sentinels make it a replica)
    that sentinel reports it healthy: asked first, it would send writes to a primary that is
    about to be demoted and resynchronised (found by tests/e2e/test_sentinel_failover.py).

    The sentinels are asked at once, each within `answer_timeout`, so one that does not answer
    (a dropped route) costs a connect that timeout at most, not the sum. One that did not
    answer last time is still asked but not waited for while the others answer; it is waited
    for again once it answers."""

    answer_timeout: float = 1.0
    _silent: frozenset[int] = frozenset()

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        asks = [loop.create_task(self._ask(i, s)) for i, s in enumerate(self.sentinels)]
        awaited = [a for i, a in enumerate(asks) if i not in self._silent]
        await asyncio.wait(awaited or asks)  # each ends within its own timeout
        newest: tuple[int, str, int] | None = None
        for ask in asks:
            if not ask.done():
                ask.add_done_callback(_consume)
                continue
            masters = ask.result()
            state = masters.get(service_name) if isinstance(masters, dict) else None
            if state and self.check_master_state(state, service_name):
                epoch = int(state.get("config-epoch", 0))
                if newest is None or epoch > newest[0]:
                    newest = (epoch, str(state["ip"]), int(state["port"]))
        if newest is None:
            raise MasterNotFoundError(f"No master found for {service_name!r}")
        return newest[1], newest[2]

    async def _ask(self, index: int, sentinel: Redis) -> Any:
        """What one sentinel says of its masters; None when it does not answer in time."""
        try:
            async with asyncio.timeout(self.answer_timeout):
                masters = await sentinel.sentinel_masters()
        except (RedisConnectionError, RedisTimeoutError, TimeoutError):
            self._silent = self._silent | {index}
            return None
        self._silent = self._silent - {index}
        return masters


def _consume(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _retry(retries: int) -> Retry:
    # One quick retry covers a pooled connection the server closed. None after a timeout: a
    # client waits on these calls, and a second wait would double the bound.
    return Retry(
        ExponentialWithJitterBackoff(base=0.01, cap=0.05),
        retries,
        supported_errors=(RedisConnectionError,),
    )


class Connections:
    """What a store talks to Redis with (see the module docstring)."""

    def __init__(
        self,
        target: RedisTarget,
        *,
        socket_timeout: float,
        connect_timeout: float,
        retries: int,
        max_connections: int,
    ) -> None:
        self.target = target
        self._timeout, self._connect_timeout = socket_timeout, connect_timeout
        self._retries = retries
        self._blocking: Redis | None = None
        common: dict[str, Any] = {
            "decode_responses": False,
            # The call's deadline (`bounded.py`) answers the caller; redis-py's own timeout
            # ends the abandoned call (and frees its connection) soon after.
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": connect_timeout,
            "retry": _retry(retries),
        }
        self._sentinel: Sentinel | None = None
        self.client: Redis | BoundedRedisCluster
        self.hot: ScriptPipeline | ClusterScriptPipeline
        if target.topology == "cluster":
            cluster = BoundedRedisCluster(
                startup_nodes=[ClusterNode(h, p) for h, p in target.nodes],
                username=target.username,
                password=target.password,
                ssl=target.tls,
                max_connections=max_connections,
                # A failover leaves slots unserved for a moment: those calls fail, not all.
                require_full_coverage=False,
                **_tls_options(target),
                **common,
            )
            cluster.bound = socket_timeout
            self.client = cluster
            self.hot = ClusterScriptPipeline(
                target.nodes, self._node_link, socket_timeout=socket_timeout
            )
        elif target.topology == "sentinel":
            sentinel = self._sentinel = _NewestSentinel(  # type: ignore[no-untyped-call]
                list(target.nodes),
                socket_timeout=socket_timeout,
                socket_connect_timeout=connect_timeout,
            )
            sentinel.answer_timeout = connect_timeout
            client = sentinel.master_for(
                target.service,
                redis_class=BoundedRedis,
                connection_pool_class=_BlockingSentinelPool,
                max_connections=max_connections,
                timeout=socket_timeout,  # the wait for a pooled connection
                **self._node_options(),
                **common,
            )
            cast(BoundedRedis, client).bound = socket_timeout
            self.client = client
            self.hot = ScriptPipeline(
                target.url,
                socket_timeout=socket_timeout,
                connect_timeout=connect_timeout,
                address=self._primary,
                wait_replicas=target.wait_replicas,
                wait_ms=target.wait_ms,
                shard=target.service,
            )
        else:
            # A bounded pool: a burst waits briefly for a connection instead of failing (the
            # caller waits for the wait and the reply together at most `socket_timeout`).
            pool = BlockingConnectionPool.from_url(
                target.url, max_connections=max_connections, timeout=socket_timeout, **common
            )
            client = cast(BoundedRedis, BoundedRedis.from_pool(pool))
            client.bound = socket_timeout
            self.client = client
            self.hot = ScriptPipeline(
                target.url,
                socket_timeout=socket_timeout,
                connect_timeout=connect_timeout,
                wait_replicas=target.wait_replicas,
                wait_ms=target.wait_ms,
                shard=_server_name(target.url),
            )

    def _node_options(self) -> dict[str, Any]:
        t = self.target
        return {"db": t.db, "username": t.username, "password": t.password, "ssl": t.tls} | (
            _tls_options(t)
        )

    def _node_link(self, address: Address) -> ScriptPipeline:
        t = self.target
        return ScriptPipeline(
            t.node_url(address),
            socket_timeout=self._timeout,
            connect_timeout=self._connect_timeout,
            wait_replicas=t.wait_replicas,
            wait_ms=t.wait_ms,
            shard=f"{address[0]}:{address[1]}",
        )

    async def _primary(self) -> Address:
        assert self._sentinel is not None
        host, port = await self._sentinel.discover_master(self.target.service)
        return str(host), int(port)

    def blocking(self, block_seconds: float) -> Redis | None:
        """The queue's own connection for blocking reads (made on first use); None on a
        cluster."""
        if self._blocking is None and self.target.topology != "cluster":
            options: dict[str, Any] = {
                "decode_responses": False,
                "socket_timeout": block_seconds + self._timeout,  # a BLOCK is that long
                "socket_connect_timeout": self._connect_timeout,
                "retry": _retry(self._retries),
            }
            if self._sentinel is not None:
                self._blocking = self._sentinel.master_for(
                    self.target.service, **self._node_options(), **options
                )
            else:
                self._blocking = Redis.from_url(self.target.url, **options)
        return self._blocking

    async def close(self) -> None:
        blocking, self._blocking = self._blocking, None
        await self.hot.close()
        if blocking is not None:
            await blocking.aclose()
        await self.client.aclose()
        if self._sentinel is not None:
            await self._sentinel.aclose()


def _server_name(url: str) -> str:
    """`host:port` (or the socket's path) of a one-server URL, credentials left out."""
    params = parse_url(url)
    if "path" in params:
        return str(params["path"])
    return f"{params.get('host', 'localhost')}:{params.get('port', 6379)}"


def _tls_options(target: RedisTarget) -> dict[str, Any]:
    options: dict[str, Any] = dict(target.tls_options) if target.tls else {}
    if "ssl_check_hostname" in options:
        options["ssl_check_hostname"] = options["ssl_check_hostname"].lower() not in ("0", "false")
    return options
