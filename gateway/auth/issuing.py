"""Issuing and revoking API keys: shared by the CLI and the embedded default's first start."""

from __future__ import annotations

import time

from gateway.auth import hash_api_key, new_api_key
from gateway.config.loader import GatewayConfig
from gateway.ids import new_key_id
from gateway.store.base import ApiKeyRecord, KeySettings, Store
from gateway.store.key_tags import split_tag

__all__ = [
    "KEY_PREFIX_CHARS",
    "UnknownTenant",
    "check_tenant",
    "issue_key",
    "revoke_key",
    "rotate_key",
]

KEY_PREFIX_CHARS = 10
"""How much of a key its record keeps for display (`gw-` and 7 random characters)."""


class UnknownTenant(ValueError):
    pass


def check_tenant(config: GatewayConfig, tenant: str) -> None:
    """UnknownTenant, naming the routing file and the tenants it declares, for any other name:
    every command treats an unknown tenant the same way."""
    if tenant not in config.tenants:
        known = ", ".join(sorted(config.tenants)) or "none"
        raise UnknownTenant(
            f"tenant {tenant!r} is not declared in {config.path} (known tenants: {known})"
        )


async def issue_key(
    store: Store, config: GatewayConfig, tenant: str, settings: KeySettings | None = None
) -> tuple[str, ApiKeyRecord]:
    """Returns the key (shown once, never stored) and its record."""
    check_tenant(config, tenant)
    key = new_api_key(tenant)
    record = ApiKeyRecord(
        key_id=new_key_id(),
        tenant=tenant,
        created_at=time.time(),
        prefix=key[:KEY_PREFIX_CHARS],
        settings=settings or KeySettings(),
    )
    await store.create_key(record, hash_api_key(key))
    return key, record


async def rotate_key(
    store: Store, key_id: str, tenant: str, grace_seconds: float
) -> tuple[str, ApiKeyRecord] | None:
    """A new secret for the key (same id, settings and spend); the old one works for
    `grace_seconds` more. None when there is no such key or it is revoked."""
    key = new_api_key(tenant)
    record = await store.rotate_key(
        key_id, hash_api_key(key), key[:KEY_PREFIX_CHARS], grace_seconds=grace_seconds
    )
    return (key, record) if record is not None else None


async def revoke_key(store: Store, key_id_or_key: str) -> bool:
    """Accepts the key id (`key_...`) or the key itself."""
    if key_id_or_key.startswith("key_"):
        return await store.revoke_key(key_id_or_key)
    record = await store.get_key(hash_api_key(key_id_or_key), split_tag(key_id_or_key))
    return record is not None and await store.revoke_key(record.key_id)
