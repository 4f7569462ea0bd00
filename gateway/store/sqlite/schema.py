"""The SQLite schema and connection settings.

WAL lets readers run beside the one writer; synchronous=NORMAL makes a commit cost
microseconds (durable at checkpoints, never corrupt); busy_timeout lets the CLI and the server
share the file. Balances are derived data kept with the ledger in one transaction:
`wallets.balance` always equals the sum of the tenant's `ledger.amount`.

Only durable state lives here (schema 6): keys, wallets, the ledger, completed idempotency
replies, tasks, artifacts and stored responses. Holds, rate buckets, in-flight leases and
per-call markers live in the serving process's memory (`memory.py`), so a request writes only
what must survive it.
Every B-tree a commit touches is one more 4 KiB page written to the WAL, so each table has only
the indexes its lookups need:

- `ledger`: primary key (tenant, seq) for newest-first paging (appends go to the tenant's
  rightmost leaf), unique (tenant, id) so an entry applies once per id.
- `idempotency`: rowid order is insertion order (the sweep deletes the oldest rows first, no
  expiry index), unique `scope` for the lookup. A task create's row has `call_id` = the task id
  and no reply (the task is the reply).
- `tasks`: the record is one msgpack blob; the columns beside it are what lookups select on.
  `seq` (the rowid) is creation order: newest-first listing per tenant, oldest-first queue.
  Two partial indexes are the queue: queued tasks by seq, running ones by lease expiry. A
  task not confirmed yet has the `status` column `unconfirmed` (a third partial index, for the
  sweep of creates a dead gateway never finished); its record reads `queued`. Three more make
  a filtered listing one index range: (tenant, status, seq), (tenant, capability, seq),
  (tenant, status, capability, seq); and ended tasks by `completed_at` (partial) are the
  retention sweep's.
- `artifacts`: metadata only (the bytes are in blob storage), an expiry index for the sweep.
- `responses`: stored Responses API responses, unique (tenant, response_id); rowid order is
  expiry order (one retention for all), so the sweep deletes the oldest rows, no expiry index.

Schema 3 only added `tasks` and `artifacts`: a schema-2 file is migrated by creating them.
Schema 4 added `ledger.model` (what a charge, debit or refund was for) and `api_keys.prefix`
(the key's first characters, for operators): older files gain the columns ('' in old rows).
Schema 5 added the `tasks_unconfirmed` index (two-step task creates), the listing indexes and
`tasks.completed_at` (filled from the records of the tasks that had ended, so retention counts
from when they did).
Schema 6 added `responses`, `callbacks` and `callback_secrets`: an older file is migrated by
creating them.
Schema 7 added key governance: `api_keys.settings` (msgpack `KeySettings`, NULL = none),
`api_keys.previous_hash` / `previous_until` (a rotated key's old secret and the end of its
grace), `ledger.key_id` (the key an entry was for, '' in old rows) and `key_spend` (each key's
spend in its current day, week, month and in total: one row per key and period kind, its
`start` the period's first day, so a row of a past period reads as 0 and is restarted by the
next entry). Old keys read as keys without limits; their spend counts from the migration.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec

__all__ = ["SCHEMA_VERSION", "connect"]

SCHEMA_VERSION = 7

_TABLES = (
    """CREATE TABLE IF NOT EXISTS api_keys (
        key_hash TEXT PRIMARY KEY,
        key_id TEXT NOT NULL UNIQUE,
        tenant TEXT NOT NULL,
        created_at REAL NOT NULL,
        revoked_at REAL,
        prefix TEXT NOT NULL DEFAULT '',
        settings BLOB,
        previous_hash TEXT,
        previous_until REAL
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
        model TEXT NOT NULL DEFAULT '',
        key_id TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (tenant, seq),
        UNIQUE (tenant, id)
    ) WITHOUT ROWID""",
    # Completed replies (a chat reply, or NULL for a task create: its row names the task);
    # in-flight chat leases live in memory since schema 2.
    """CREATE TABLE IF NOT EXISTS idempotency (
        scope TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        call_id TEXT NOT NULL,
        reply BLOB,
        expires_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS tasks (
        seq INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL UNIQUE,
        tenant TEXT NOT NULL,
        status TEXT NOT NULL,
        capability TEXT NOT NULL,
        lease_until REAL,
        record BLOB NOT NULL,
        completed_at REAL
    )""",
    "CREATE INDEX IF NOT EXISTS tasks_by_tenant ON tasks (tenant, seq)",
    "CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks (tenant, status, seq)",
    "CREATE INDEX IF NOT EXISTS tasks_by_capability ON tasks (tenant, capability, seq)",
    "CREATE INDEX IF NOT EXISTS tasks_by_both ON tasks (tenant, status, capability, seq)",
    "CREATE INDEX IF NOT EXISTS tasks_queued ON tasks (seq) WHERE status = 'queued'",
    "CREATE INDEX IF NOT EXISTS tasks_leased ON tasks (lease_until) WHERE status = 'running'",
    "CREATE INDEX IF NOT EXISTS tasks_unconfirmed ON tasks (seq) WHERE status = 'unconfirmed'",
    """CREATE TABLE IF NOT EXISTS artifacts (
        artifact_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        kind TEXT NOT NULL,
        filename TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        blob_key TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        task_id TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS artifacts_by_expiry ON artifacts (expires_at)",
    """CREATE TABLE IF NOT EXISTS responses (
        tenant TEXT NOT NULL,
        response_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        response BLOB NOT NULL,
        input_items BLOB NOT NULL,
        UNIQUE (tenant, response_id)
    )""",
    # Task callbacks (schema 6): a row per delivery scheduled ('due', by when) or given up
    # ('failed': failed or disabled, by when); a delivered one has no row.
    """CREATE TABLE IF NOT EXISTS callbacks (
        task_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        state TEXT NOT NULL,
        due_at REAL NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS callbacks_due ON callbacks (due_at) WHERE state = 'due'",
    "CREATE INDEX IF NOT EXISTS callbacks_failed ON callbacks (due_at) WHERE state = 'failed'",
    """CREATE TABLE IF NOT EXISTS key_spend (
        key_id TEXT NOT NULL,
        period TEXT NOT NULL,
        start INTEGER NOT NULL,
        spent INTEGER NOT NULL,
        PRIMARY KEY (key_id, period)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS callback_secrets (
        tenant TEXT PRIMARY KEY,
        secret TEXT NOT NULL,
        created_at REAL NOT NULL,
        previous TEXT,
        previous_until REAL
    ) WITHOUT ROWID""",
)

_ADDED_COLUMNS = (
    # (table, column, definition): columns added after the table was first made (schema 4, 5, 7).
    ("ledger", "model", "TEXT NOT NULL DEFAULT ''"),
    ("api_keys", "prefix", "TEXT NOT NULL DEFAULT ''"),
    ("tasks", "completed_at", "REAL"),
    ("api_keys", "settings", "BLOB"),
    ("api_keys", "previous_hash", "TEXT"),
    ("api_keys", "previous_until", "REAL"),
    ("ledger", "key_id", "TEXT NOT NULL DEFAULT ''"),
)

_ON_ADDED_COLUMNS = (
    # Indexes of added columns (made once the column exists), then their values in old rows.
    """CREATE INDEX IF NOT EXISTS tasks_ended ON tasks (completed_at)
        WHERE completed_at IS NOT NULL""",
    """CREATE UNIQUE INDEX IF NOT EXISTS api_keys_previous ON api_keys (previous_hash)
        WHERE previous_hash IS NOT NULL""",
    """UPDATE tasks SET completed_at = task_completed_at(record)
        WHERE completed_at IS NULL AND status IN ('succeeded', 'failed', 'canceled')""",
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
            for statement in _TABLES:  # a schema-2 file only gains the new tables
                conn.execute(statement)
            _add_columns(conn)
            conn.create_function("task_completed_at", 1, _completed_at, deterministic=True)
            for statement in _ON_ADDED_COLUMNS:
                conn.execute(statement)
            if version == 1:
                for statement in _FROM_V1:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _add_columns(conn: sqlite3.Connection) -> None:
    """Columns a table made by an older schema lacks (a cheap ALTER: old rows read the default)."""
    for table, column, definition in _ADDED_COLUMNS:
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")


class _Ended(msgspec.Struct):
    completed_at: float | None = None


_ended = msgspec.msgpack.Decoder(_Ended)


def _completed_at(record: bytes) -> float | None:
    """`completed_at` of a task's msgpack record (the migration to schema 5 fills the column)."""
    return _ended.decode(record).completed_at
