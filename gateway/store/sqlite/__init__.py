"""The SQLite backend of the store: one short transaction per atomic operation."""

from gateway.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
