"""Bearer API key -> the calling tenant and key, with a short in-process cache on shared stores.

The cache never outlives a key: an expiry (`expires_at`, or the end of a rotated secret's
grace) is checked against the clock on every request, cached or not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gateway.auth.keys import hash_api_key
from gateway.clock import Clock, wall
from gateway.config.limits import RateLimits
from gateway.config.loader import GatewayConfig, Tenant
from gateway.errors import InvalidApiKey
from gateway.store.base import ApiKeyRecord, KeyBudget, KeySettings, Store
from gateway.store.key_tags import split_tag

__all__ = ["DUPLICATE", "EXPIRED", "Authenticator", "Caller", "key_view"]

_MAX_CACHED = 10_000

DUPLICATE = "\x00two Authorization headers"
"""What the request context holds when a request carried more than one Authorization header."""

EXPIRED = "the API key has expired"


@dataclass(frozen=True, slots=True)
class Caller:
    """The key a request came with. `tenant` is the tenant as this key sees it: its models
    narrowed to the key's list, its rate limits lowered to the key's (`key_view`), so routing,
    `auto`, the model listings and the admission's buckets apply the key's limits with no
    code of their own."""

    key_id: str
    tenant: Tenant
    settings: KeySettings = field(default_factory=KeySettings)

    @property
    def budget(self) -> KeyBudget | None:
        return self.settings.budget


def key_view(tenant: Tenant, key: KeySettings) -> Tenant:
    """`tenant` narrowed by the key's model list and rate limits (itself when it has none)."""
    rpm, tpm, models = key.requests_per_minute, key.tokens_per_minute, key.models
    if rpm is None and tpm is None and not models:
        return tenant
    limits = tenant.limits
    if rpm is not None or tpm is not None:
        limits = RateLimits(
            requests_per_minute=_lower(limits.requests_per_minute, rpm),
            tokens_per_minute=_lower(limits.tokens_per_minute, tpm),
        )
    allowed = tenant.allowed_models
    if models:
        allowed = frozenset(m for m in models if allowed is None or m in allowed)
    return replace(tenant, allowed_models=allowed, limits=limits)


def _lower(tenant: int, key: int | None) -> int:
    """The lower of two limits, 0 being no limit."""
    if key is None or key <= 0:
        return tenant
    return key if tenant <= 0 else min(tenant, key)


class Authenticator:
    def __init__(
        self,
        store: Store,
        config: GatewayConfig,
        cache_seconds: float,
        clock: Clock = wall,
        on_expired: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._on_expired = on_expired
        """Told of each call refused because its key expired (a metric)."""
        self._config = config
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._cache: dict[str, tuple[float, ApiKeyRecord | None]] = {}

    async def authenticate(self, authorization: str | None) -> Caller:
        if authorization is DUPLICATE:
            raise InvalidApiKey("Send exactly one Authorization header.")
        if not authorization or authorization[:7].lower() != "bearer ":
            raise InvalidApiKey()
        key = authorization[7:].strip()
        if not key:
            raise InvalidApiKey()
        record = await self._lookup(hash_api_key(key), split_tag(key))
        if record is None or record.revoked_at is not None:
            raise InvalidApiKey()
        ends = _ends_at(record)
        if ends is not None and self._clock() >= ends:
            if self._on_expired is not None:
                self._on_expired()
            raise InvalidApiKey(EXPIRED)
        tenant = self._config.tenants.get(record.tenant)
        if tenant is None:
            raise InvalidApiKey("This API key's tenant is not enabled on this gateway.")
        settings = record.settings
        return Caller(key_id=record.key_id, tenant=key_view(tenant, settings), settings=settings)

    def forget(self, key_hash: str | None = None) -> None:
        if key_hash is None:
            self._cache.clear()
        else:
            self._cache.pop(key_hash, None)

    async def _lookup(self, key_hash: str, tag: str | None) -> ApiKeyRecord | None:
        if self._cache_seconds <= 0:
            return await self._store.get_key(key_hash, tag)
        now = time.monotonic()
        cached = self._cache.get(key_hash)
        if cached is not None and cached[0] > now:
            return cached[1]
        record = await self._store.get_key(key_hash, tag)
        if len(self._cache) >= _MAX_CACHED:
            self._cache.clear()
        self._cache[key_hash] = (now + self._cache_seconds, record)
        return record


def _ends_at(record: ApiKeyRecord) -> float | None:
    """When the secret stops working: the key's expiry or the end of a rotation's grace."""
    ends = [t for t in (record.settings.expires_at, record.valid_until) if t is not None]
    return min(ends) if ends else None
