"""The SQLite backend's one error mapping: `sqlite3.OperationalError` ("database is locked"
after the busy timeout, a file that cannot be opened, a full disk) is `StoreUnavailable` (503,
retryable). Every statement the store runs is inside it."""

from __future__ import annotations

import sqlite3

from gateway.store.errors import StoreErrorMap

__all__ = ["store_errors"]

store_errors = StoreErrorMap(sqlite3.OperationalError)
"""`with store_errors:` around statements on the store's connection."""
