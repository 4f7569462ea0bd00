"""`SqliteStore`: the embedded store, for ONE gateway process (use Redis for several replicas).

Its state is split by what must survive a crash:

- Durable, in the SQLite file: API keys, wallets, the ledger and completed idempotency replies.
  The CLI (another process) shares the file to issue and revoke keys, grant credits and read
  wallets and ledgers; a second store on the file sees all of these.
- Ephemeral, in this process's memory (`memory.py`): rate buckets, credit holds, in-flight
  idempotency leases and the per-call "reconciled once" markers. Losing them in a crash is the
  same as their expiry, which the interface allows: a dead call's hold is released, a dead
  request's idempotency key freed, rate limits start over. Another process does not see them:
  two gateways on one file would each admit up to the full rate limit and could together hold
  more than the balance. That is the trade: a request costs no write for admission.

So `admit` is memory checks plus one read (the balance, with the completed reply when there is
an idempotency claim); `settle` is one write transaction only when it has something durable
(a charge, a reply to keep), and `release` touches memory only (`admission.py`). Nothing
awaits between a check and its update, so each operation is atomic on the event loop.
Statements run inline (tens of microseconds, cheaper than a thread handoff); `BEGIN IMMEDIATE`
takes the write lock up front against the CLI. A lock not obtained within the busy timeout, or
any other `OperationalError`, becomes `StoreUnavailable`, in one place (`errors.py`). The WAL
is checkpointed, and kept bounded, from a worker thread (`checkpoint.py`), never inside a
commit; while it rewinds the WAL (a few ms, once per 64 MiB written) the operations that write
wait before their first check, everything else goes on.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from gateway.clock import Clock, wall
from gateway.store.durability import ShardDurability
from gateway.store.sqlite import ops
from gateway.store.sqlite.admission import SqliteAdmissionArea
from gateway.store.sqlite.api_keys import SqliteKeyArea
from gateway.store.sqlite.artifacts import SqliteArtifactArea
from gateway.store.sqlite.callbacks import SqliteCallbackArea
from gateway.store.sqlite.checkpoint import Checkpointer, WalLimits
from gateway.store.sqlite.errors import store_errors
from gateway.store.sqlite.lock import claim_for_serving
from gateway.store.sqlite.memory import Memory
from gateway.store.sqlite.responses import SqliteResponseArea
from gateway.store.sqlite.schema import connect
from gateway.store.sqlite.task_index import SqliteTaskIndexArea
from gateway.store.sqlite.tasks import SqliteTaskArea
from gateway.store.sqlite.wallet import SqliteWalletArea

__all__ = ["SqliteStore"]

_T = TypeVar("_T")

_REPLY_SWEEP_EVERY = 16
"""Write transactions between sweeps of expired replies."""
_REPLY_SWEEP_ROWS = 32
"""Oldest rows a sweep looks at: twice what could have been added since, so it keeps up."""


class SqliteStore(
    SqliteKeyArea,
    SqliteAdmissionArea,
    SqliteWalletArea,
    SqliteTaskArea,
    SqliteTaskIndexArea,
    SqliteArtifactArea,
    SqliteCallbackArea,
    SqliteResponseArea,
):
    """The `gateway.store.base.Store` on SQLite (stdlib sqlite3, WAL, one connection).

    Each area is a module of its own, mixed in here: keys (`api_keys.py`), admission
    (`admission.py`), wallet and ledger (`wallet.py`), tasks (`tasks.py`; their listing and
    retention: `task_index.py`), artifacts (`artifacts.py`), stored responses
    (`responses.py`). This class opens and closes the file and runs their statements (`_read`,
    `_write`), with SQLite's errors mapped in one place (`errors.py`). Every time that decides
    anything (holds, leases, buckets, sweeps, reply, task and response expiry) comes from
    `clock`, so tests move it instead of sleeping.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        busy_timeout_ms: int = 5000,
        wal: WalLimits | None = None,
        sweep_seconds: float = 10.0,
        serving: bool = False,
        clock: Clock = wall,
    ) -> None:
        self.path = path
        self._clock = clock
        self.serving = serving
        """A serving store keeps holds and limits in memory, so it claims the file for itself."""
        self.busy_timeout_ms = busy_timeout_ms
        self.wal = wal or WalLimits()
        self.sweep_seconds = sweep_seconds
        """How often an admission sweeps expired entries out of memory."""
        self._conn: sqlite3.Connection | None = None
        self._checkpointer: Checkpointer | None = None
        self._writes = 0
        self._mem = Memory()
        self._next_sweep = 0.0
        self._lock: IO[bytes] | None = None
        self._writable: asyncio.Event | None = None
        """Cleared while the checkpointer rewinds the WAL: writes wait, reads go on."""

    async def open(self) -> None:
        if self._conn is not None:
            return
        if self.serving:
            self._lock = claim_for_serving(self.path)
        with store_errors:
            self._conn = connect(self.path, busy_timeout_ms=self.busy_timeout_ms)
            self._conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._conn.execute(f"PRAGMA journal_size_limit = {int(self.wal.restart_bytes)}")
        self._writable = asyncio.Event()
        self._writable.set()
        self._checkpointer = Checkpointer(self.path, self._writable, self.wal)
        self._checkpointer.start()

    async def close(self) -> None:
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            await checkpointer.stop()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()  # the last connection to close checkpoints and removes the WAL
        if checkpointer is not None:
            checkpointer.release()  # after the connections: it would drop their locks
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.close()

    async def ping(self) -> bool:
        if self._conn is None:
            return False
        try:
            self._conn.execute("SELECT 1").fetchone()
        except sqlite3.Error:
            return False
        return True

    async def durability(self, within: float) -> list[ShardDurability]:
        return []  # one file: there are no replicas to wait for

    def node_of(self, tenant: str) -> str:
        return ""

    def memory_sizes(self) -> dict[str, int]:
        """Entries held in memory per kind (buckets, holds, leases, calls): tests, metrics."""
        return self._mem.sizes()

    @property
    def checkpointer(self) -> Checkpointer | None:
        """The WAL checkpoint task while open (its counters serve tests and benchmarks)."""
        return self._checkpointer

    async def _may_write(self) -> None:
        """Wait while the WAL is being rewound (a few ms); call before any check it guards."""
        writable = self._writable
        if writable is not None and not writable.is_set():
            await writable.wait()

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("SqliteStore is not open")
        return self._conn

    def _write(self, body: Callable[[sqlite3.Connection, float], _T]) -> _T:
        """Run `body(conn, now)` in one IMMEDIATE transaction; `now` is read under the lock."""
        conn = self._db
        with store_errors:
            conn.execute("BEGIN IMMEDIATE")
            try:
                now = self._clock()
                result = body(conn, now)
                self._writes += 1
                if self._writes % _REPLY_SWEEP_EVERY == 0:
                    ops.sweep_replies(conn, now, _REPLY_SWEEP_ROWS)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return result

    def _read(self, body: Callable[[sqlite3.Connection], _T]) -> _T:
        with store_errors:
            return body(self._db)

    def _rows(self, sql: str, params: tuple[object, ...]) -> list[Any]:
        return self._read(lambda conn: conn.execute(sql, params).fetchall())
