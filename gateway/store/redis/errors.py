"""The Redis backend's one error mapping: connection failures and timeouts (redis-py's, and a
command's deadline, `bounded.py`) are `StoreUnavailable` (503, retryable). Every call into
redis-py or the pipeline runs in it."""

from __future__ import annotations

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store.errors import StoreErrorMap

__all__ = ["store_errors"]

store_errors = StoreErrorMap(RedisConnectionError, RedisTimeoutError, TimeoutError)
"""`with store_errors:` around a call into Redis."""
