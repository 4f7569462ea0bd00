"""The SQLite schema and connection settings.

WAL lets readers run beside the one writer; synchronous=NORMAL makes a commit cost
microseconds (durable at checkpoints, never corrupt); busy_timeout lets the CLI and the server
share the file. Balances are derived data kept with the ledger in one transaction:
`wallets.balance` always equals the sum of the tenant's `ledger.amount`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["SCHEMA_VERSION", "connect"]

SCHEMA_VERSION = 1

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
    """CREATE TABLE IF NOT EXISTS holds (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        amount INTEGER NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS holds_by_expiry ON holds (tenant, expires_at)",
    """CREATE TABLE IF NOT EXISTS rate_buckets (
        api_key_id TEXT PRIMARY KEY,
        r_level REAL,
        r_at REAL,
        t_level REAL,
        t_at REAL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS idempotency (
        scope TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        call_id TEXT NOT NULL,
        reply BLOB,
        expires_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS idempotency_by_expiry ON idempotency (expires_at)",
    """CREATE TABLE IF NOT EXISTS finished_calls (
        call_id TEXT PRIMARY KEY,
        expires_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS finished_calls_by_expiry ON finished_calls (expires_at)",
)


def connect(path: Path | str, *, busy_timeout_ms: int) -> sqlite3.Connection:
    """Open the database in autocommit mode (transactions are explicit) and create the schema."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA journal_size_limit = 67108864")  # trim the WAL file to 64 MiB
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _TABLES:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except BaseException:
        conn.close()
        raise
    return conn
