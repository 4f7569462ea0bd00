"""The store: the gateway's state behind one interface, on SQLite or Redis."""

from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    AdmissionResult,
    ApiKeyRecord,
    IdempotencyClaim,
    LedgerEntry,
    LedgerKind,
    LedgerPage,
    RateLimits,
    RateState,
    Release,
    Settlement,
    Store,
    StoredReply,
    Wallet,
)
from gateway.store.factory import store_from_url
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore

__all__ = [
    "Admission",
    "AdmissionOutcome",
    "AdmissionResult",
    "ApiKeyRecord",
    "IdempotencyClaim",
    "LedgerEntry",
    "LedgerKind",
    "LedgerPage",
    "RateLimits",
    "RateState",
    "RedisStore",
    "Release",
    "Settlement",
    "SqliteStore",
    "Store",
    "StoredReply",
    "Wallet",
    "store_from_url",
]
