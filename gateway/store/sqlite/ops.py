"""The SQL of the SQLite store: its few reads, and the bodies of its write transactions.

Each write body runs inside one `BEGIN IMMEDIATE` transaction opened by `SqliteStore`, with
`now` read after the write lock was taken, so read-then-write is atomic against the CLI in
another process too. A commit writes every page it touched to the WAL, so the bodies touch as
few as they can: a charge is the wallet row and the two ledger B-trees, a stored reply the
idempotency table's last leaf and its scope index.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec

from gateway.store.base import LedgerEntry, LedgerKind, Settlement, StoredReply
from gateway.store.periods import PERIODS, BudgetPeriod, period_start_day

__all__ = [
    "ENTRY_COLUMNS",
    "append_entry",
    "balance",
    "balance_and_reply",
    "entry_from_row",
    "grant",
    "key_spent",
    "ledger_range",
    "settle",
    "sweep_replies",
]

_reply_encoder = msgspec.msgpack.Encoder()
_reply_decoder = msgspec.msgpack.Decoder(StoredReply)


def balance(conn: sqlite3.Connection, tenant: str) -> int:
    row = conn.execute("SELECT balance FROM wallets WHERE tenant = ?", (tenant,)).fetchone()
    return int(row[0]) if row is not None else 0


_BALANCE_AND_REPLY = (
    "SELECT (SELECT balance FROM wallets WHERE tenant = ?), i.fingerprint, i.reply"
    " FROM (SELECT 1) LEFT JOIN idempotency AS i ON i.scope = ? AND i.expires_at > ?"
)


def balance_and_reply(
    conn: sqlite3.Connection, tenant: str, scope: str, now: float
) -> tuple[int, str | None, StoredReply | None]:
    """One statement: the balance, and the live completed reply of `scope` (fingerprint, reply).

    The reply is decoded only when it is there; the caller decides whether it fits.
    """
    bal, fingerprint, blob = conn.execute(_BALANCE_AND_REPLY, (tenant, scope, now)).fetchone()
    reply = _reply_decoder.decode(blob) if blob is not None else None
    return int(bal or 0), fingerprint, reply


def settle(
    conn: sqlite3.Connection, s: Settlement, entry_id: str, store_reply: bool, now: float
) -> int:
    """The durable part of a settlement: the charge once per call, the reply; the balance."""
    call = s.call
    bal: int | None = None
    if s.charge_units > 0:
        exists = conn.execute(
            "SELECT 1 FROM ledger WHERE tenant = ? AND id = ?", (call.tenant, entry_id)
        ).fetchone()
        if exists is None:
            entry = append_entry(
                conn,
                call.tenant,
                entry_id,
                "charge",
                -s.charge_units,
                now,
                reason=s.reason,
                request_id=call.request_id,
                model=s.model,
                key_id=call.api_key_id,
            )
            bal = entry.balance_after_units
    claim = call.idempotency
    if store_reply and claim is not None and s.reply is not None:
        # First completion wins: a live reply of another call is never overwritten.
        conn.execute(
            "INSERT INTO idempotency VALUES (?, ?, ?, ?, ?) ON CONFLICT (scope) DO UPDATE"
            " SET fingerprint = excluded.fingerprint, call_id = excluded.call_id,"
            " reply = excluded.reply, expires_at = excluded.expires_at"
            " WHERE idempotency.expires_at <= ? OR idempotency.call_id = excluded.call_id",
            (
                claim.scope,
                claim.fingerprint,
                call.call_id,
                _reply_encoder.encode(s.reply),
                now + s.reply_ttl_seconds,
                now,
            ),
        )
    return bal if bal is not None else balance(conn, call.tenant)


def sweep_replies(conn: sqlite3.Connection, now: float, limit: int) -> None:
    """Delete expired replies among the `limit` oldest rows (rowid = insertion order).

    Replies share one TTL in practice, so the oldest rows expire first; a row kept longer only
    delays the ones behind it (they are ignored when read and replaced when their scope comes
    back). The bound keeps each sweep short on the event loop, and needs no expiry index.
    """
    conn.execute(
        "DELETE FROM idempotency WHERE rowid IN"
        " (SELECT rowid FROM idempotency ORDER BY rowid LIMIT ?) AND expires_at <= ?",
        (limit, now),
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
    model: str = "",
    key_id: str = "",
) -> LedgerEntry:
    """Move the balance and record why, numbered by the tenant's sequence for stable paging;
    an entry of a key moves that key's spend in each period kind by the same amount."""
    bal, seq = conn.execute(
        "INSERT INTO wallets VALUES (?, ?, 1) ON CONFLICT (tenant) DO UPDATE"
        " SET balance = balance + excluded.balance, seq = seq + 1 RETURNING balance, seq",
        (tenant, amount),
    ).fetchone()
    conn.execute(
        _INSERT_ENTRY,
        (
            tenant, seq, entry_id, kind, amount, bal, now, reason, task_id, request_id or None,
            model, key_id,
        ),
    )  # fmt: skip
    if key_id:
        conn.executemany(
            _ADD_SPEND, [(key_id, p, period_start_day(p, now), -amount) for p in PERIODS]
        )
    return LedgerEntry(
        id=entry_id,
        tenant=tenant,
        kind=kind,
        amount_units=amount,
        balance_after_units=bal,
        created_at=now,
        reason=reason,
        task_id=task_id,
        request_id=request_id or None,
        model=model,
        key_id=key_id,
    )


_INSERT_ENTRY = (
    "INSERT INTO ledger (tenant, seq, id, kind, amount, balance_after, created_at, reason,"
    " task_id, request_id, model, key_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

_ADD_SPEND = (
    "INSERT INTO key_spend VALUES (?, ?, ?, ?) ON CONFLICT (key_id, period) DO UPDATE"
    " SET spent = CASE WHEN start = excluded.start THEN spent + excluded.spent"
    " ELSE excluded.spent END, start = excluded.start"
)

ENTRY_COLUMNS = (
    "id, tenant, kind, amount, balance_after, created_at, reason, task_id, request_id, model,"
    " key_id"
)


def key_spent(conn: sqlite3.Connection, key_id: str, period: BudgetPeriod, now: float) -> int:
    """What the key spent in the `period` that `now` is in (0 once that period is over)."""
    row = conn.execute(
        "SELECT spent FROM key_spend WHERE key_id = ? AND period = ? AND start = ?",
        (key_id, period, period_start_day(period, now)),
    ).fetchone()
    return int(row[0]) if row is not None else 0


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
        model=row[9],
        key_id=row[10],
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


def ledger_range(
    conn: sqlite3.Connection,
    tenant: str,
    since: float,
    until: float,
    limit: int,
    after: str | None,
) -> tuple[list[LedgerEntry], bool]:
    """One page of `Store.ledger_range`: (entries, has_more).

    The first entry is found by bisecting the tenant's sequence (each probe one primary-key
    lookup), so a range costs O(log n) probes and its own rows, whatever the ledger's size.
    """
    if after is not None:
        row = conn.execute(
            "SELECT seq FROM ledger WHERE tenant = ? AND id = ?", (tenant, after)
        ).fetchone()
        if row is None:
            return [], False
        start = int(row[0]) + 1
    else:
        start = _first_seq_at(conn, tenant, since)
    rows = conn.execute(
        f"SELECT {ENTRY_COLUMNS} FROM ledger WHERE tenant = ? AND seq >= ? ORDER BY seq LIMIT ?",
        (tenant, start, limit + 1),
    ).fetchall()
    entries: list[LedgerEntry] = []
    for row in rows:
        if row[5] >= until:
            return entries, False
        if len(entries) == limit:
            return entries, True
        entries.append(entry_from_row(row))
    return entries, False


def _first_seq_at(conn: sqlite3.Connection, tenant: str, since: float) -> int:
    """The sequence number of the tenant's first entry stamped at or after `since` (one past
    the last when there is none). Sequence numbers may have gaps: each probe takes the first
    entry at or after its midpoint."""
    low, high = conn.execute(
        "SELECT MIN(seq), MAX(seq) FROM ledger WHERE tenant = ?", (tenant,)
    ).fetchone()
    if low is None:
        return 0
    high += 1
    while low < high:
        middle = (low + high) // 2
        seq, stamp = conn.execute(
            "SELECT seq, created_at FROM ledger WHERE tenant = ? AND seq >= ? ORDER BY seq LIMIT 1",
            (tenant, middle),
        ).fetchone()
        if stamp < since:
            low = seq + 1
        else:
            high = middle
    return int(low)
