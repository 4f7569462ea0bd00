"""The SQLite backend of the store, for one gateway process: durable state in the file,
what expires by design (holds, rate buckets, in-flight leases) in the process's memory."""

from gateway.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
