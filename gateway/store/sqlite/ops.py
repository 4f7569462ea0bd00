"""The bodies of the SQLite store's write transactions.

Each function runs inside one `BEGIN IMMEDIATE` transaction opened by `SqliteStore`, with `now`
read after the write lock was taken, so read-then-write is atomic across processes. They do
the same steps, in the same order, as the Redis scripts; the contract suite holds them equal.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec

from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    AdmissionResult,
    LedgerEntry,
    LedgerKind,
    RateLimits,
    Release,
    Settlement,
    StoredReply,
)
from gateway.store.sqlite import buckets

__all__ = [
    "DONE_TTL_SECONDS",
    "ENTRY_COLUMNS",
    "admit",
    "append_entry",
    "entry_from_row",
    "grant",
    "release",
    "settle",
    "sweep",
]

DONE_TTL_SECONDS = 86_400
"""How long a settled/released call is remembered, so its tokens are reconciled only once."""

_reply_encoder = msgspec.msgpack.Encoder()
_reply_decoder = msgspec.msgpack.Decoder(StoredReply)

_Buckets = tuple[float | None, float | None, float | None, float | None]


def _load_buckets(
    conn: sqlite3.Connection, api_key_id: str, limits: RateLimits, now: float
) -> tuple[float, float, _Buckets]:
    row = conn.execute(
        "SELECT r_level, r_at, t_level, t_at FROM rate_buckets WHERE api_key_id = ?",
        (api_key_id,),
    ).fetchone()
    stored: _Buckets = row if row is not None else (None, None, None, None)
    r = buckets.refill(stored[0], stored[1], limits.requests_per_minute, now)
    t = buckets.refill(stored[2], stored[3], limits.tokens_per_minute, now)
    return r, t, stored


def _save_buckets(
    conn: sqlite3.Connection,
    api_key_id: str,
    limits: RateLimits,
    r: float,
    t: float,
    stored: _Buckets,
    now: float,
) -> None:
    """Store the buckets that are on; one that is off keeps whatever it had."""
    r_level, r_at, t_level, t_at = stored
    if limits.requests_per_minute > 0:
        r_level, r_at = r, now
    if limits.tokens_per_minute > 0:
        t_level, t_at = t, now
    conn.execute(
        "INSERT OR REPLACE INTO rate_buckets VALUES (?, ?, ?, ?, ?)",
        (api_key_id, r_level, r_at, t_level, t_at),
    )


def _available(conn: sqlite3.Connection, tenant: str, now: float) -> int:
    """Purge the tenant's expired holds, then balance minus the active ones."""
    conn.execute("DELETE FROM holds WHERE tenant = ? AND expires_at <= ?", (tenant, now))
    row = conn.execute(
        "SELECT (SELECT balance FROM wallets WHERE tenant = ?),"
        " (SELECT SUM(amount) FROM holds WHERE tenant = ?)",
        (tenant, tenant),
    ).fetchone()
    return int(row[0] or 0) - int(row[1] or 0)


def _finish_call(conn: sqlite3.Connection, call_id: str, now: float) -> bool:
    """Mark a call settled or released; True only the first time (within the marker's life)."""
    cur = conn.execute(
        "INSERT INTO finished_calls VALUES (?, ?) ON CONFLICT (call_id) DO UPDATE"
        " SET expires_at = excluded.expires_at WHERE finished_calls.expires_at <= ?",
        (call_id, now + DONE_TTL_SECONDS, now),
    )
    return cur.rowcount == 1


def admit(conn: sqlite3.Connection, a: Admission, hold_id: str, now: float) -> AdmissionResult:
    limits, claim = a.limits, a.idempotency
    rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
    r, t, stored = _load_buckets(conn, a.api_key_id, limits, now)
    available = _available(conn, a.tenant, now)
    need = min(a.tokens, tpm) if tpm > 0 else 0

    def result(outcome: AdmissionOutcome, reply: StoredReply | None = None) -> AdmissionResult:
        limited = outcome is AdmissionOutcome.RATE_LIMITED
        rate = buckets.state(limits, r, t, need, limited)
        return AdmissionResult(outcome=outcome, rate=rate, reply=reply, available_units=available)

    if rpm > 0 and r < 1:
        return result(AdmissionOutcome.RATE_LIMITED)

    if claim is not None:
        rec = conn.execute(
            "SELECT fingerprint, reply FROM idempotency WHERE scope = ? AND expires_at > ?",
            (claim.scope, now),
        ).fetchone()
        if rec is not None:
            r -= 1 if rpm > 0 else 0
            _save_buckets(conn, a.api_key_id, limits, r, t, stored, now)
            if rec[0] != claim.fingerprint:
                return result(AdmissionOutcome.KEY_REUSED)
            if rec[1] is not None:
                return result(AdmissionOutcome.REPLAY, _reply_decoder.decode(rec[1]))
            return result(AdmissionOutcome.IN_PROGRESS)

    if tpm > 0 and t < need:
        return result(AdmissionOutcome.RATE_LIMITED)

    if a.hold_units > 0 and a.hold_units > available:
        r -= 1 if rpm > 0 else 0
        _save_buckets(conn, a.api_key_id, limits, r, t, stored, now)
        return result(AdmissionOutcome.INSUFFICIENT_CREDITS)

    r -= 1 if rpm > 0 else 0
    t -= need
    _save_buckets(conn, a.api_key_id, limits, r, t, stored, now)
    if a.hold_units > 0 and a.hold_seconds > 0:
        conn.execute(
            "INSERT OR IGNORE INTO holds VALUES (?, ?, ?, ?)",
            (a.tenant, hold_id, a.hold_units, now + a.hold_seconds),
        )
    if claim is not None:
        conn.execute(
            "INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, NULL, ?)",
            (claim.scope, claim.fingerprint, a.call_id, now + claim.lease_seconds),
        )
    return result(AdmissionOutcome.ADMITTED)


def settle(conn: sqlite3.Connection, s: Settlement, hold_id: str, entry_id: str, now: float) -> int:
    conn.execute("DELETE FROM holds WHERE tenant = ? AND id = ?", (s.tenant, hold_id))
    first = _finish_call(conn, s.call_id, now)
    if s.charge_units > 0:
        exists = conn.execute(
            "SELECT 1 FROM ledger WHERE tenant = ? AND id = ?", (s.tenant, entry_id)
        ).fetchone()
        if exists is None:
            append_entry(
                conn,
                s.tenant,
                entry_id,
                "charge",
                -s.charge_units,
                now,
                reason=s.reason,
                request_id=s.request_id,
            )
    tpm = s.limits.tokens_per_minute
    if first and tpm > 0:
        r, t, stored = _load_buckets(conn, s.api_key_id, s.limits, now)
        t = buckets.reconcile(t, tpm, min(s.tokens_reserved, tpm) - s.tokens_used)
        _save_buckets(conn, s.api_key_id, s.limits, r, t, stored, now)
    claim = s.idempotency
    if claim is not None and s.reply is not None:
        # First completion wins: never overwrite a live record another call now owns.
        owner = conn.execute(
            "SELECT call_id FROM idempotency WHERE scope = ? AND expires_at > ?",
            (claim.scope, now),
        ).fetchone()
        if owner is None or owner[0] == s.call_id:
            conn.execute(
                "INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, ?, ?)",
                (
                    claim.scope,
                    claim.fingerprint,
                    s.call_id,
                    _reply_encoder.encode(s.reply),
                    now + s.reply_ttl_seconds,
                ),
            )
    elif claim is not None:
        _drop_in_flight(conn, claim.scope, s.call_id)
    row = conn.execute("SELECT balance FROM wallets WHERE tenant = ?", (s.tenant,)).fetchone()
    return int(row[0]) if row is not None else 0


def release(conn: sqlite3.Connection, rel: Release, hold_id: str, now: float) -> None:
    conn.execute("DELETE FROM holds WHERE tenant = ? AND id = ?", (rel.tenant, hold_id))
    first = _finish_call(conn, rel.call_id, now)
    tpm = rel.limits.tokens_per_minute
    if first and tpm > 0 and rel.tokens_reserved > 0:
        r, t, stored = _load_buckets(conn, rel.api_key_id, rel.limits, now)
        t = buckets.reconcile(t, tpm, min(rel.tokens_reserved, tpm))
        _save_buckets(conn, rel.api_key_id, rel.limits, r, t, stored, now)
    if rel.idempotency is not None:
        _drop_in_flight(conn, rel.idempotency.scope, rel.call_id)


def _drop_in_flight(conn: sqlite3.Connection, scope: str, call_id: str) -> None:
    conn.execute(
        "DELETE FROM idempotency WHERE scope = ? AND call_id = ? AND reply IS NULL",
        (scope, call_id),
    )


def append_entry(
    conn: sqlite3.Connection,
    tenant: str,
    entry_id: str,
    kind: LedgerKind,
    amount: int,
    now: float,
    *,
    reason: str = "",
    task_id: str | None = None,
    request_id: str | None = None,
) -> LedgerEntry:
    """Move the balance and record why, numbered by the tenant's sequence for stable paging."""
    balance, seq = conn.execute(
        "INSERT INTO wallets VALUES (?, ?, 1) ON CONFLICT (tenant) DO UPDATE"
        " SET balance = balance + excluded.balance, seq = seq + 1 RETURNING balance, seq",
        (tenant, amount),
    ).fetchone()
    conn.execute(
        "INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (tenant, seq, entry_id, kind, amount, balance, now, reason, task_id, request_id or None),
    )
    return LedgerEntry(
        id=entry_id,
        tenant=tenant,
        kind=kind,
        amount_units=amount,
        balance_after_units=balance,
        created_at=now,
        reason=reason,
        task_id=task_id,
        request_id=request_id or None,
    )


ENTRY_COLUMNS = "id, tenant, kind, amount, balance_after, created_at, reason, task_id, request_id"


def entry_from_row(row: tuple[Any, ...]) -> LedgerEntry:
    """A `ledger` row selected with ENTRY_COLUMNS."""
    return LedgerEntry(
        id=row[0],
        tenant=row[1],
        kind=row[2],
        amount_units=row[3],
        balance_after_units=row[4],
        created_at=row[5],
        reason=row[6],
        task_id=row[7],
        request_id=row[8],
    )


def grant(
    conn: sqlite3.Connection,
    tenant: str,
    amount: int,
    entry_id: str,
    reason: str,
    kind: LedgerKind,
    now: float,
) -> LedgerEntry:
    row = conn.execute(
        f"SELECT {ENTRY_COLUMNS} FROM ledger WHERE tenant = ? AND id = ?", (tenant, entry_id)
    ).fetchone()
    if row is not None:
        return entry_from_row(row)
    return append_entry(conn, tenant, entry_id, kind, amount, now, reason=reason)


def sweep(conn: sqlite3.Connection, now: float) -> None:
    """Delete expired records nobody will look up again (run now and then, inside a write)."""
    conn.execute("DELETE FROM idempotency WHERE expires_at <= ?", (now,))
    conn.execute("DELETE FROM finished_calls WHERE expires_at <= ?", (now,))
    conn.execute("DELETE FROM holds WHERE expires_at <= ?", (now,))
