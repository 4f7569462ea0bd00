"""The Redis backend's one error mapping: what means "Redis cannot do it now" is
`StoreUnavailable` (503, retryable). Every call into redis-py or the pipeline runs in it.

That is: connection failures and timeouts (redis-py's, a command's deadline, `bounded.py`, and
a durable write too few replicas acknowledged, `pipeline.ReplicationTimeout`); and what a
cluster or a failover answers while it moves: CLUSTERDOWN and MASTERDOWN, TRYAGAIN, READONLY
(a primary demoted to a replica), a slot no known node serves, a cluster redis-py could not map.
A CROSSSLOT or a script error is a bug and passes through. One more is a lost connection though
it does not say so: under uvloop (the server's loop), a write on a connection whose peer went
away (a killed primary) raises `RuntimeError` ("... the handler is closed"), which redis-py lets
through as it is (seen in a cluster failover, where it had answered a chat 500).
"""

from __future__ import annotations

from types import TracebackType

from redis.exceptions import (
    ClusterDownError,
    ReadOnlyError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.errors import StoreUnavailable
from gateway.store.errors import StoreErrorMap

__all__ = ["UNAVAILABLE", "store_errors"]

UNAVAILABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    TimeoutError,
    ClusterDownError,
    TryAgainError,
    ReadOnlyError,
    SlotNotCoveredError,
)


_CLOSED_TRANSPORT = "the handler is closed"
"""uvloop's words for a transport already closed (`UVHandle._ensure_alive`)."""


class _RedisErrors(StoreErrorMap):
    """`StoreErrorMap`, redis-py's cluster client's own "no node answered" (a
    `RedisClusterException` caused by one of those errors), and uvloop's closed transport."""

    __slots__ = ()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            return
        if isinstance(exc, RedisClusterException) and isinstance(exc.__cause__, self.types):
            raise StoreUnavailable() from exc
        if isinstance(exc, RuntimeError) and _CLOSED_TRANSPORT in str(exc):
            raise StoreUnavailable() from exc
        super().__exit__(exc_type, exc, traceback)


store_errors = _RedisErrors(*UNAVAILABLE)
"""`with store_errors:` around a call into Redis."""
