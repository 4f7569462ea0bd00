"""Bearer API key -> the calling tenant, with a short in-process cache on shared stores."""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.auth.keys import hash_api_key
from gateway.config.loader import GatewayConfig, Tenant
from gateway.errors import InvalidApiKey
from gateway.store.base import ApiKeyRecord, Store

__all__ = ["DUPLICATE", "Authenticator", "Caller"]

_MAX_CACHED = 10_000

DUPLICATE = "\x00two Authorization headers"
"""What the request context holds when a request carried more than one Authorization header."""


@dataclass(frozen=True, slots=True)
class Caller:
    key_id: str
    tenant: Tenant


class Authenticator:
    def __init__(self, store: Store, config: GatewayConfig, cache_seconds: float) -> None:
        self._store = store
        self._config = config
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, ApiKeyRecord | None]] = {}

    async def authenticate(self, authorization: str | None) -> Caller:
        if authorization is DUPLICATE:
            raise InvalidApiKey("Send exactly one Authorization header.")
        if not authorization or authorization[:7].lower() != "bearer ":
            raise InvalidApiKey()
        key = authorization[7:].strip()
        if not key:
            raise InvalidApiKey()
        record = await self._lookup(hash_api_key(key))
        if record is None or record.revoked_at is not None:
            raise InvalidApiKey()
        tenant = self._config.tenants.get(record.tenant)
        if tenant is None:
            raise InvalidApiKey("This API key's tenant is not enabled on this gateway.")
        return Caller(key_id=record.key_id, tenant=tenant)

    def forget(self, key_hash: str | None = None) -> None:
        if key_hash is None:
            self._cache.clear()
        else:
            self._cache.pop(key_hash, None)

    async def _lookup(self, key_hash: str) -> ApiKeyRecord | None:
        if self._cache_seconds <= 0:
            return await self._store.get_key(key_hash)
        now = time.monotonic()
        cached = self._cache.get(key_hash)
        if cached is not None and cached[0] > now:
            return cached[1]
        record = await self._store.get_key(key_hash)
        if len(self._cache) >= _MAX_CACHED:
            self._cache.clear()
        self._cache[key_hash] = (now + self._cache_seconds, record)
        return record
