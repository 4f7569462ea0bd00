"""The SQLite schema and connection settings.

WAL lets readers run beside the one writer; synchronous=NORMAL makes a commit cost
microseconds (durable at checkpoints, never corrupt); busy_timeout lets the CLI and the server
share the file. Balances are derived data kept with the ledger in one transaction:
`wallets.balance` always equals the sum of the tenant's `ledger.amount`.

Only durable state lives here (schema 2): keys, wallets, the ledger and completed idempotency
replies. Holds, rate buckets, in-flight leases and per-call markers live in the serving
process's memory (`memory.py`), so a request writes only what must survive it. Every B-tree a
commit touches is one more 4 KiB page written to the WAL, so each table has only the indexes
its lookups need:

- `ledger`: primary key (tenant, seq) for newest-first paging (appends go to the tenant's
  rightmost leaf), unique (tenant, id) so an entry applies once per id.
- `idempotency`: rowid order is insertion order (the sweep deletes the oldest rows first, no
  expiry index), unique `scope` for the lookup.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["SCHEMA_VERSION", "connect"]

SCHEMA_VERSION = 2

_TABLES = (
    """CREATE TABLE IF NOT EXISTS api_keys (
        key_hash TEXT PRIMARY KEY,
        key_id TEXT NOT NULL UNIQUE,
        tenant TEXT NOT NULL,
        created_at REAL NOT NULL,
        revoked_at REAL
    )""",
    "CREATE INDEX IF NOT EXISTS api_keys_by_tenant ON api_keys (tenant, created_at, key_hash)",
    """CREATE TABLE IF NOT EXISTS wallets (
        tenant TEXT PRIMARY KEY,
        balance INTEGER NOT NULL,
        seq INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS ledger (
        tenant TEXT NOT NULL,
        seq INTEGER NOT NULL,
        id TEXT NOT NULL,
        kind TEXT NOT NULL,
        amount INTEGER NOT NULL,
        balance_after INTEGER NOT NULL,
        created_at REAL NOT NULL,
        reason TEXT NOT NULL,
        task_id TEXT,
        request_id TEXT,
        PRIMARY KEY (tenant, seq),
        UNIQUE (tenant, id)
    ) WITHOUT ROWID""",
    # Completed replies only (reply is never NULL since schema 2; the column stays as schema 1
    # declared it, so a migrated file and a new one are the same table).
    """CREATE TABLE IF NOT EXISTS idempotency (
        scope TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        call_id TEXT NOT NULL,
        reply BLOB,
        expires_at REAL NOT NULL
    )""",
)

_FROM_V1 = (
    # Schema 1 kept the ephemeral state in the file; it now lives in the serving process.
    "DROP TABLE IF EXISTS holds",
    "DROP TABLE IF EXISTS rate_buckets",
    "DROP TABLE IF EXISTS finished_calls",
    "DROP INDEX IF EXISTS idempotency_by_expiry",
    "DELETE FROM idempotency WHERE reply IS NULL",  # in-flight leases of a process now gone
)


def connect(path: Path | str, *, busy_timeout_ms: int) -> sqlite3.Connection:
    """Open the database in autocommit mode (transactions are explicit); create or migrate."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA journal_size_limit = 67108864")  # trim a restarted WAL to 64 MiB
        _create_or_migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _create_or_migrate(conn: sqlite3.Connection) -> None:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version == SCHEMA_VERSION:
        return  # the common case (every CLI command): no write lock taken
    if version > SCHEMA_VERSION:
        raise RuntimeError(
            f"the database has schema {version}, newer than this gateway's {SCHEMA_VERSION}"
        )
    conn.execute("BEGIN IMMEDIATE")
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()  # re-read under the lock
        if version < SCHEMA_VERSION:
            for statement in _TABLES:
                conn.execute(statement)
            if version == 1:
                for statement in _FROM_V1:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
