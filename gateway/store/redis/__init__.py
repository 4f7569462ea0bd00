"""The Redis backend of the store: one Lua script per atomic operation."""

from gateway.store.redis.keys import RedisKeys
from gateway.store.redis.store import RedisStore

__all__ = ["RedisKeys", "RedisStore"]
