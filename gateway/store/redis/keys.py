"""Every Redis key (and in-hash id) the Redis store uses, in one place.

All keys start with the store's prefix (default ``gw:``) so one Redis can serve several
gateways or test runs. Keys that hold state which ends by itself carry a TTL (see
docs/store.md); wallets, ledgers and API keys live until deleted.

    {p}apikey:{key_hash}        hash    key_id, tenant, created_at, revoked_at?
    {p}apikey_id:{key_id}       string  key_hash (for revoke)
    {p}tenant_keys:{tenant}     zset    key_hash by created_at (for list)
    {p}wallet:{tenant}          hash    balance, seq (the ledger's sequence)
    {p}ledger:{tenant}          hash    entry id -> msgpack entry
    {p}ledger_order:{tenant}    zset    entry id by seq (newest-first paging)
    {p}holds:{tenant}           hash    hold:{call_id} -> units; total     TTL: last hold's expiry
    {p}hold_expiry:{tenant}     zset    hold:{call_id} by expiry time      TTL: last hold's expiry
    {p}rate:{api_key_id}        hash    r, rt, t, tt (levels, times)       TTL: until both full
    {p}idem:{scope}             hash    fp, call, reply?                   TTL: lease, then reply
    {p}done:{call_id}           string  settled-or-released marker         TTL: 1 day
"""

from __future__ import annotations

__all__ = ["RedisKeys", "charge_entry_id", "hold_id"]


def hold_id(call_id: str) -> str:
    """The hold a call's admission places (a field of the holds hash, not a key)."""
    return f"hold:{call_id}"


def charge_entry_id(call_id: str) -> str:
    """The ledger entry id of a call's charge: at most one per call."""
    return f"charge:{call_id}"


class RedisKeys:
    """Builds the store's keys under one prefix."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "gw:") -> None:
        self.prefix = prefix

    def api_key(self, key_hash: str) -> str:
        return f"{self.prefix}apikey:{key_hash}"

    def api_key_id(self, key_id: str) -> str:
        return f"{self.prefix}apikey_id:{key_id}"

    def tenant_keys(self, tenant: str) -> str:
        return f"{self.prefix}tenant_keys:{tenant}"

    def wallet(self, tenant: str) -> str:
        return f"{self.prefix}wallet:{tenant}"

    def ledger(self, tenant: str) -> str:
        return f"{self.prefix}ledger:{tenant}"

    def ledger_order(self, tenant: str) -> str:
        return f"{self.prefix}ledger_order:{tenant}"

    def holds(self, tenant: str) -> str:
        return f"{self.prefix}holds:{tenant}"

    def hold_expiry(self, tenant: str) -> str:
        return f"{self.prefix}hold_expiry:{tenant}"

    def rate(self, api_key_id: str) -> str:
        return f"{self.prefix}rate:{api_key_id}"

    def idempotency(self, scope: str) -> str:
        return f"{self.prefix}idem:{scope}"

    def done(self, call_id: str) -> str:
        return f"{self.prefix}done:{call_id}"

    def pattern(self) -> str:
        """A SCAN pattern matching every key of this prefix (tests, maintenance)."""
        return f"{self.prefix}*"
