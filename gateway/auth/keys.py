"""API key material: shown once to the operator, stored only as a hash."""

from __future__ import annotations

import hashlib
import secrets

from gateway.store.key_tags import TAG_SEPARATOR, tenant_tag

__all__ = ["API_KEY_PREFIX", "hash_api_key", "new_api_key"]

API_KEY_PREFIX = "gw-"


def new_api_key(tenant: str) -> str:
    """`gw-`, 256 random bits, then the slot tag of the tenant (where the Redis store keeps
    the key's record: `gateway.store.key_tags`)."""
    return f"{API_KEY_PREFIX}{secrets.token_urlsafe(32)}{TAG_SEPARATOR}{tenant_tag(tenant)}"


def hash_api_key(key: str) -> str:
    """SHA-256 is enough: keys carry 256 random bits, so there is nothing to brute-force."""
    return hashlib.sha256(key.encode()).hexdigest()
