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

And any other exception raised inside redis-py during a call: its cluster client, while a
master is paused, has raised `AttributeError` from its own node bookkeeping. Where the error was
raised decides, not its type: walking the traceback from the `with` block inward, the last frame
of either redis-py or the gateway wins (a frame of neither, asyncio or the standard library, is
its caller's). Raised in redis-py: the client could not do the call, 503. Raised in the gateway's
own code (a decoding step inside the block, a bad argument that fails before redis-py runs): a
bug, passed through. redis-py's own `RedisError`s keep their meaning by type (a `ResponseError`
or a `DataError` is Redis or redis-py saying the command is wrong: a bug).
"""

from __future__ import annotations

import os
from types import TracebackType

import redis
from redis.exceptions import (
    ClusterDownError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.errors import StoreUnavailable
from gateway.store.errors import StoreErrorMap

__all__ = ["UNAVAILABLE", "raised_in_client", "store_errors"]

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

_CLIENT_DIR = os.path.dirname(redis.__file__) + os.sep
_GATEWAY_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_GATEWAY_DIR += os.sep


def raised_in_client(traceback: TracebackType | None) -> bool:
    """Whether the innermost frame of redis-py or the gateway in `traceback` is redis-py's."""
    inside = False
    while traceback is not None:
        filename = traceback.tb_frame.f_code.co_filename
        if filename.startswith(_CLIENT_DIR):
            inside = True
        elif filename.startswith(_GATEWAY_DIR):
            inside = False
        traceback = traceback.tb_next
    return inside


class _RedisErrors(StoreErrorMap):
    """`StoreErrorMap`, redis-py's cluster client's own "no node answered" (a
    `RedisClusterException` caused by one of those errors), uvloop's closed transport, and
    any other exception raised inside redis-py (`raised_in_client`)."""

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
        if (
            isinstance(exc, Exception)
            and not isinstance(exc, (RedisError, *self.types))
            and raised_in_client(traceback)
        ):
            raise StoreUnavailable() from exc
        super().__exit__(exc_type, exc, traceback)


store_errors = _RedisErrors(*UNAVAILABLE)
"""`with store_errors:` around a call into Redis."""
