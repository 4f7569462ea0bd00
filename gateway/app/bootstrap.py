"""Zero-setup start: on the embedded store, the `default` tenant gets a key and its grant.

The key is kept in the local data folder (mode 0600) so that every start can print it; this
happens only on the embedded default, never on a shared store.
"""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

from gateway.auth import hash_api_key
from gateway.auth.issuing import issue_key
from gateway.billing.money import units_from_credits
from gateway.config.loader import GatewayConfig
from gateway.store.base import Store
from gateway.store.key_tags import split_tag

__all__ = ["DEFAULT_TENANT", "STARTING_GRANT_ENTRY", "bootstrap_embedded"]

DEFAULT_TENANT = "default"
STARTING_GRANT_ENTRY = "grant:starting:default"


async def bootstrap_embedded(store: Store, config: GatewayConfig, data_dir: Path) -> str | None:
    """Returns a usable key of the default tenant, or None when the config has no such tenant."""
    if DEFAULT_TENANT not in config.tenants:
        return None
    grant = config.file.gateway.starting_grant_credits
    if grant > Decimal(0):
        await store.grant(
            DEFAULT_TENANT,
            units_from_credits(grant),
            entry_id=STARTING_GRANT_ENTRY,
            reason="starting grant of the embedded default",
        )
    key_file = data_dir / "default-api-key"
    saved = _read_key(key_file)
    if saved is not None:
        record = await store.get_key(hash_api_key(saved), split_tag(saved))
        if record is not None and record.revoked_at is None:
            return saved
    key, _ = await issue_key(store, config, DEFAULT_TENANT)
    _write_key(key_file, key)
    return key


def _read_key(key_file: Path) -> str | None:
    try:
        return key_file.read_text().strip() or None
    except FileNotFoundError:
        return None


def _write_key(key_file: Path, key: str) -> None:
    key_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
