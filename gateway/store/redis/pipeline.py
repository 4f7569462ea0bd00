"""A small pipelined RESP client for the store's scripts (the request path's, and every step
that moves money): one server, long-lived connections (`connection.py`).

redis-py spends more CPU per call than Redis does: a pool checkout and release, an
`asyncio.timeout` per read and send, retry wrappers, a generic encoder. Here one connection
per server carries the calls: a request is packed and written at once, and replies resolve the
waiting futures in order. `cluster_pipeline.py` keeps one of these per cluster master; behind
Sentinel the server's address is asked of the sentinels at each connect.

A *durable* call (one that moves money) goes on a second connection of its own, followed there
by `WAIT <replicas> <ms>`: its answer comes once that many replicas have its write, so a
failover cannot lose it. `WAIT` counts the writes of the connection it is sent on, and Redis
holds every later command of that connection until it returns, so on the one connection of
every call a `WAIT` that cannot be met (a replica gone) would stall admissions and reads behind
it. The replicas waited for are those the server has now, at most `wait_replicas`
(`replication.py`): with none, nothing is waited for and the write rests on the server's own
AOF, reported as reduced durability. All durable calls written in one turn of the event loop
share one `WAIT` (a group commit); fewer acknowledgements than asked is `ReplicationTimeout`,
an outcome unknown.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, NamedTuple

from hiredis import pack_command
from redis.exceptions import NoScriptError, ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store.durability import ShardDurability
from gateway.store.redis.connection import (
    Address,
    AddressSource,
    Dialer,
    Lane,
    PipelinedConnection,
    bulk,
    command_bytes,
    consume,
    encode,
)
from gateway.store.redis.replication import ReplicaWatch

__all__ = ["Address", "LuaScript", "ReplicationTimeout", "ScriptPipeline", "command_bytes"]

_INFO_REPLICATION = command_bytes("INFO", "replication")
_CONFIG_AOF = command_bytes("CONFIG", "GET", "append*")


class ReplicationTimeout(RedisTimeoutError):
    """A durable call ran, but fewer replicas than asked acknowledged it within the wait: a
    failover now could lose it, so its outcome counts as unknown."""


_DEMOTED = "UNBLOCKED"
"""Redis's error for a `WAIT` it cut short because the server stopped being a primary (made a
replica: a paused master back after its replica took over, a `REPLICAOF`)."""


def _demoted(reply: object) -> bool:
    """Whether a `WAIT` ended so: the write ran on a node that no longer leads, an outcome as
    unknown as that of a `WAIT` that timed out."""
    return isinstance(reply, ResponseError) and str(reply).startswith(_DEMOTED)


class LuaScript(NamedTuple):
    """A script's precomputed request heads: EVALSHA by SHA, or EVAL with the source."""

    evalsha: bytes
    eval: bytes

    @classmethod
    def of(cls, source: str) -> LuaScript:
        body = source.encode()
        sha = hashlib.sha1(body).hexdigest().encode()
        return cls(b"$7\r\nEVALSHA\r\n$40\r\n" + sha + b"\r\n", bulk(b"EVAL") + bulk(body))


def _command(head: bytes, keys: Sequence[Any], args: Sequence[Any]) -> bytes:
    """`*N` + a script head (EVALSHA sha / EVAL source) + numkeys, keys and args as bulks.

    hiredis packs str, int, float and bytes in C, as `encode` does (~25 values a call); what
    it refuses (bytearray; bool and the rest, which `encode` refuses too) goes the long way."""
    try:
        packed = pack_command((len(keys), *keys, *args))
    except TypeError:
        return _command_each(head, keys, args)
    # `packed` is `*M\r\n` and the bulks: the script head goes between, counted in.
    count_end = packed.index(b"\r\n") + 2
    return b"*%d\r\n%b%b" % (len(keys) + len(args) + 3, head, packed[count_end:])


def _command_each(head: bytes, keys: Sequence[Any], args: Sequence[Any]) -> bytes:
    numkeys = b"%d" % len(keys)
    parts = [b"*%d\r\n%b$%d\r\n%b\r\n" % (3 + len(keys) + len(args), head, len(numkeys), numkeys)]
    for value in (*keys, *args):
        kind = type(value)  # the common types inline: this runs ~25 times per call
        if kind is str:
            data = value.encode()
        elif kind is int:
            data = b"%d" % value
        elif kind is bytes:
            data = value
        else:
            data = encode(value)
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


class ScriptPipeline:
    """EVALSHA (and a few plain commands) over lazily opened, pipelined connections.

    `url` (redis://, rediss://, unix://) gives the server, credentials and database; with
    `address`, the server's address is asked of it at each connect instead (Sentinel).
    Creating it does not contact Redis; the first call connects (AUTH and SELECT as the URL
    says), and a call after the connection was lost reconnects. `wait_replicas` > 0 makes
    durable calls wait, on a connection of their own, for that many replicas at most (those
    the server has), `wait_ms` at most; `shard` names the server in what it reports.
    """

    def __init__(
        self,
        url: str,
        *,
        socket_timeout: float,
        connect_timeout: float,
        address: AddressSource | None = None,
        wait_replicas: int = 0,
        wait_ms: int = 0,
        shard: str = "",
    ) -> None:
        dialer = Dialer(
            url, socket_timeout=socket_timeout, connect_timeout=connect_timeout, address=address
        )
        self._wait_ms = wait_ms
        self._watch: ReplicaWatch | None = None
        self._durable: Lane | None = None
        if wait_replicas > 0:
            self._watch = ReplicaWatch(shard or url, wait_replicas, self._ask_replication)
            self._durable = Lane(dialer, self._watch.reconnected)
        self._main = Lane(dialer, self._watch.reconnected if self._watch else None)

    @property
    def _conn(self) -> PipelinedConnection | None:
        """The connection of every call that is not durable (None before the first)."""
        return self._main.conn

    async def evalsha(
        self,
        script: LuaScript,
        keys: Sequence[object],
        args: Sequence[object],
        *,
        durable: bool = False,
        asking: bool = False,
    ) -> Any:
        """Run `script` by SHA; on NOSCRIPT (Redis restarted, SCRIPT FLUSH) once by source.
        `asking`: preceded by ASKING (a cluster slot being migrated to this server)."""
        lane = self._durable if durable and self._durable is not None else self._main
        conn = lane.ready() or await lane.get()
        try:
            return await self._run(lane, conn, _command(script.evalsha, keys, args), asking)
        except NoScriptError:
            # EVAL runs the script and caches it, so later EVALSHAs find it again.
            conn = await lane.get()
            return await self._run(lane, conn, _command(script.eval, keys, args), asking)

    async def call(self, *args: object) -> Any:
        """One plain command (CLUSTER SLOTS, a registry write), in the FIFO of non-durable
        calls."""
        conn = await self._main.get()
        return await self._run(self._main, conn, command_bytes(*args), False)

    async def command(self, key: str, *args: object) -> Any:
        """`call`, with the key it is about (what a cluster routes by)."""
        return await self.call(*args)

    async def _run(self, lane: Lane, conn: PipelinedConnection, data: bytes, asking: bool) -> Any:
        watch = self._watch
        if lane is self._main or watch is None:
            if asking:
                conn.send(command_bytes("ASKING")).add_done_callback(consume)
            reply = await conn.send(data)
        else:
            replicas = watch.replicas_now()
            if replicas is None:
                replicas = await watch.replicas_to_wait()
                if not conn.alive:  # lost while the replicas were counted
                    conn = await lane.get()
            if asking:
                conn.send(command_bytes("ASKING")).add_done_callback(consume)
            sent = conn.send(data)
            if replicas == 0:  # none keep up: the server's own AOF is what there is
                reply = await sent
            else:
                acks = conn.wait_barrier(replicas, self._wait_ms)
                reply = await sent
                if not isinstance(reply, Exception):
                    acked = await acks
                    if _demoted(acked):
                        raise ReplicationTimeout(f"the WAIT was cut short: {acked}") from acked
                    if isinstance(acked, Exception):
                        raise acked
                    if acked < replicas:
                        watch.fell_short(acked)
                        raise ReplicationTimeout(
                            f"{acked} of {replicas} replicas acknowledged within {self._wait_ms} ms"
                        )
        if isinstance(reply, Exception):
            if isinstance(reply, ReadOnlyError):
                # A primary demoted to a replica (a failover): reconnect, and ask anew where.
                self.drop()
            raise reply
        return reply

    async def _ask_replication(self) -> tuple[bytes, Any]:
        conn = await self._main.get()
        info, config = conn.send(_INFO_REPLICATION), conn.send(_CONFIG_AOF)
        replies = await asyncio.gather(info, config)
        if isinstance(replies[0], Exception):
            raise replies[0]
        return replies[0], replies[1]

    async def durability(self, within: float) -> ShardDurability | None:
        """How durably this server writes money now, read again first when older than a
        second (waiting at most `within`); None: it waits for no replica."""
        if self._watch is None:
            return None
        return await self._watch.durability(within)

    def drop(self) -> None:
        """Fail the calls in flight and reconnect next time (the server is not where it was)."""
        self._main.drop("Connection dropped")
        if self._durable is not None:
            self._durable.drop("Connection dropped")

    async def close(self) -> None:
        self._main.close()
        if self._durable is not None:
            self._durable.close()
