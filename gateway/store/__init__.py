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
    "Release",
    "Settlement",
    "Store",
    "StoredReply",
    "Wallet",
    "store_from_url",
]
