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
(a charge, a reply to keep), and `release` touches memory only. Nothing awaits between a check
and its update, so each operation is atomic on the event loop. Statements run inline (tens of
microseconds, cheaper than a thread handoff); `BEGIN IMMEDIATE` takes the write lock up front
against the CLI. A lock not obtained within the busy timeout, or any other `OperationalError`,
becomes `StoreUnavailable`. The WAL is checkpointed, and kept bounded, from a worker thread
(`checkpoint.py`), never inside a commit; while it rewinds the WAL (a few ms, once per
64 MiB written) the operations that write wait before their first check, everything else
goes on.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from gateway.errors import StoreUnavailable
from gateway.store import buckets
from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    AdmissionResult,
    ApiKeyRecord,
    LedgerEntry,
    LedgerKind,
    LedgerPage,
    Release,
    Settlement,
    StoredReply,
    Wallet,
)
from gateway.store.ledger_ids import charge_id
from gateway.store.sqlite import ops
from gateway.store.sqlite.artifacts import SqliteArtifactArea
from gateway.store.sqlite.checkpoint import Checkpointer, WalLimits
from gateway.store.sqlite.lock import claim_for_serving
from gateway.store.sqlite.memory import CALL_SECONDS, FENCE_SECONDS, Lease, Memory
from gateway.store.sqlite.schema import connect
from gateway.store.sqlite.tasks import SqliteTaskArea

__all__ = ["SqliteStore"]

_T = TypeVar("_T")

_REPLY_SWEEP_EVERY = 16
"""Write transactions between sweeps of expired replies."""
_REPLY_SWEEP_ROWS = 32
"""Oldest rows a sweep looks at: twice what could have been added since, so it keeps up."""


class SqliteStore(SqliteTaskArea, SqliteArtifactArea):
    """The `gateway.store.base.Store` on SQLite (stdlib sqlite3, WAL, one connection).

    Tasks and artifacts are areas of their own (`tasks.py`, `artifacts.py`); they take their
    time from `clock`, so tests can move it.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        busy_timeout_ms: int = 5000,
        wal: WalLimits | None = None,
        sweep_seconds: float = 10.0,
        serving: bool = False,
        clock: Callable[[], float] = time.time,
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
        try:
            self._conn = connect(self.path, busy_timeout_ms=self.busy_timeout_ms)
            self._conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._conn.execute(f"PRAGMA journal_size_limit = {int(self.wal.restart_bytes)}")
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable() from exc
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
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                now = time.time()
                result = body(conn, now)
                self._writes += 1
                if self._writes % _REPLY_SWEEP_EVERY == 0:
                    ops.sweep_replies(conn, now, _REPLY_SWEEP_ROWS)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable() from exc
        return result

    def _read(self, body: Callable[[sqlite3.Connection], _T]) -> _T:
        try:
            return body(self._db)
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable() from exc

    def _rows(self, sql: str, params: tuple[object, ...]) -> list[Any]:
        return self._read(lambda conn: conn.execute(sql, params).fetchall())

    # API keys ------------------------------------------------------------------------------

    async def create_key(self, record: ApiKeyRecord, key_hash: str) -> None:
        await self._may_write()
        self._write(
            lambda conn, _now: conn.execute(
                "INSERT OR REPLACE INTO api_keys VALUES (?, ?, ?, ?, ?)",
                (key_hash, record.key_id, record.tenant, record.created_at, record.revoked_at),
            )
        )

    async def get_key(self, key_hash: str) -> ApiKeyRecord | None:
        rows = self._rows(
            "SELECT key_id, tenant, created_at, revoked_at FROM api_keys WHERE key_hash = ?",
            (key_hash,),
        )
        return _key_record(rows[0]) if rows else None

    async def revoke_key(self, key_id: str) -> bool:
        def body(conn: sqlite3.Connection, now: float) -> bool:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE key_id = ?",
                (now, key_id),
            )
            return cur.rowcount > 0

        await self._may_write()
        return self._write(body)

    async def list_keys(self, tenant: str) -> list[ApiKeyRecord]:
        rows = self._rows(
            "SELECT key_id, tenant, created_at, revoked_at FROM api_keys WHERE tenant = ?"
            " ORDER BY created_at, key_hash",
            (tenant,),
        )
        return [_key_record(row) for row in rows]

    # Request path -------------------------------------------------------------------------

    async def admit(self, admission: Admission) -> AdmissionResult:
        """The steps of `docs/store.md`, in memory, after one read of the file."""
        a, mem, now = admission, self._mem, time.time()
        if now >= self._next_sweep:
            mem.sweep(now)
            self._next_sweep = now + self.sweep_seconds
        limits, claim = a.limits, a.idempotency
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        r, t = mem.levels(a.api_key_id, limits, now)
        need = min(a.tokens, tpm) if tpm > 0 else 0

        lease: Lease | None = None
        fingerprint: str | None = None
        stored: StoredReply | None = None
        if claim is not None and (lease := mem.lease(claim.scope, now)) is None:
            balance, fingerprint, stored = self._read(
                lambda conn: ops.balance_and_reply(conn, a.tenant, claim.scope, now)
            )
        else:
            balance = self._read(lambda conn: ops.balance(conn, a.tenant))
        available = balance - mem.held(a.tenant, now)

        def result(outcome: AdmissionOutcome, reply: StoredReply | None = None) -> AdmissionResult:
            limited = outcome is AdmissionOutcome.RATE_LIMITED
            rate = buckets.state(limits, r, t, need, limited)
            return AdmissionResult(
                outcome=outcome, rate=rate, reply=reply, available_units=available
            )

        if a.call_id in mem.fenced:
            return result(AdmissionOutcome.ABANDONED)

        if rpm > 0 and r < 1:
            return result(AdmissionOutcome.RATE_LIMITED)

        if claim is not None:
            if lease is not None:
                fingerprint = lease.fingerprint
            if fingerprint is not None:
                r -= 1 if rpm > 0 else 0
                mem.store_levels(a.api_key_id, limits, r, t, now)
                if fingerprint != claim.fingerprint:
                    return result(AdmissionOutcome.KEY_REUSED)
                if lease is None:
                    return result(AdmissionOutcome.REPLAY, stored)
                return result(AdmissionOutcome.IN_PROGRESS)

        if tpm > 0 and t < need:
            return result(AdmissionOutcome.RATE_LIMITED)

        if a.hold_units > 0 and a.hold_units > available:
            r -= 1 if rpm > 0 else 0
            mem.store_levels(a.api_key_id, limits, r, t, now)
            return result(AdmissionOutcome.INSUFFICIENT_CREDITS)

        r -= 1 if rpm > 0 else 0
        t -= need
        mem.store_levels(a.api_key_id, limits, r, t, now)
        keep = 0  # how long this call's marker must last; 0: it reserved nothing
        if a.hold_units > 0 and a.hold_seconds > 0:
            mem.hold(a.tenant, a.call_id, a.hold_units, now + a.hold_seconds)
            keep = a.hold_seconds
        if claim is not None:
            mem.leases[claim.scope] = Lease(claim.fingerprint, a.call_id, now + claim.lease_seconds)
            keep = max(keep, claim.lease_seconds)
        if keep or need:
            mem.calls[a.call_id] = now + (keep or CALL_SECONDS)
        return result(AdmissionOutcome.ADMITTED)

    async def settle(self, settlement: Settlement) -> int:
        await self._may_write()  # before reading memory: nothing awaits after this
        s, mem = settlement, self._mem
        claim = s.idempotency
        keep_reply = False
        if claim is not None and s.reply is not None:
            # First completion wins: a live lease of another call owns the scope.
            owner = mem.lease(claim.scope, time.time())
            keep_reply = owner is None or owner.call_id == s.call_id
        if s.charge_units > 0 or keep_reply:
            entry_id = charge_id(s.call_id)
            balance = self._write(lambda conn, now: ops.settle(conn, s, entry_id, keep_reply, now))
        else:
            balance = self._read(lambda conn: ops.balance(conn, s.tenant))
        # The durable part is committed: now let go of what the call took (never on failure,
        # so a settlement that raised leaves the call as it was, as one transaction would).
        mem.unhold(s.tenant, s.call_id)
        tpm = s.limits.tokens_per_minute
        if mem.calls.pop(s.call_id, None) is not None and tpm > 0:
            now = time.time()
            r, t = mem.levels(s.api_key_id, s.limits, now)
            t = buckets.reconcile(t, tpm, min(s.tokens_reserved, tpm) - s.tokens_used)
            mem.store_levels(s.api_key_id, s.limits, r, t, now)
        if claim is not None:
            mem.drop_lease(claim.scope, s.call_id)
        return balance

    async def release(self, release: Release) -> None:
        rel, mem = release, self._mem
        mem.unhold(rel.tenant, rel.call_id)
        tpm = rel.limits.tokens_per_minute
        now = time.time()
        if mem.calls.pop(rel.call_id, None) is None:
            mem.fenced[rel.call_id] = now + FENCE_SECONDS
        elif tpm > 0 and rel.tokens_reserved > 0:
            r, t = mem.levels(rel.api_key_id, rel.limits, now)
            t = buckets.reconcile(t, tpm, min(rel.tokens_reserved, tpm))
            mem.store_levels(rel.api_key_id, rel.limits, r, t, now)
        if rel.idempotency is not None:
            mem.drop_lease(rel.idempotency.scope, rel.call_id)

    # Wallet -------------------------------------------------------------------------------

    async def grant(
        self,
        tenant: str,
        amount_units: int,
        *,
        entry_id: str,
        reason: str,
        kind: LedgerKind = "grant",
    ) -> LedgerEntry:
        await self._may_write()
        return self._write(
            lambda conn, now: ops.grant(conn, tenant, amount_units, entry_id, reason, kind, now)
        )

    async def wallet(self, tenant: str) -> Wallet:
        """The balance from the file; held_units from this process's holds (0 in the CLI)."""
        balance = self._read(lambda conn: ops.balance(conn, tenant))
        held = self._mem.held(tenant, time.time())
        return Wallet(tenant=tenant, balance_units=balance, held_units=held)

    async def ledger(self, tenant: str, *, limit: int, after: str | None = None) -> LedgerPage:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        if after is None:
            rows = self._rows(
                f"SELECT {ops.ENTRY_COLUMNS} FROM ledger WHERE tenant = ?"
                " ORDER BY seq DESC LIMIT ?",
                (tenant, limit + 1),
            )
        else:
            # An unknown `after` makes the bound NULL, so nothing matches: an empty page.
            rows = self._rows(
                f"SELECT {ops.ENTRY_COLUMNS} FROM ledger WHERE tenant = ? AND seq <"
                " (SELECT seq FROM ledger WHERE tenant = ? AND id = ?)"
                " ORDER BY seq DESC LIMIT ?",
                (tenant, tenant, after, limit + 1),
            )
        entries = [ops.entry_from_row(row) for row in rows[:limit]]
        return LedgerPage(entries=entries, has_more=len(rows) > limit)


def _key_record(row: Any) -> ApiKeyRecord:
    key_id, tenant, created_at, revoked_at = row
    return ApiKeyRecord(key_id=key_id, tenant=tenant, created_at=created_at, revoked_at=revoked_at)
