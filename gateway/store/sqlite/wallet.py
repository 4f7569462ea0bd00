"""The SQLite store's wallet area: grants, the balance and the ledger (all in the file), and
the holds this process placed (in its memory)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.clock import Clock
from gateway.store.base import LedgerEntry, LedgerKind, LedgerPage, Wallet
from gateway.store.sqlite import ops
from gateway.store.sqlite.memory import Memory

__all__ = ["SqliteWalletArea"]

_T = TypeVar("_T")


class SqliteWalletArea:
    """The wallet operations of `SqliteStore` (a mixin: the store has the connection, the
    ephemeral memory and the clock)."""

    _clock: Clock
    _mem: Memory

    if TYPE_CHECKING:

        def _write(self, body: Callable[[sqlite3.Connection, float], _T]) -> _T: ...
        def _read(self, body: Callable[[sqlite3.Connection], _T]) -> _T: ...
        def _rows(self, sql: str, params: tuple[object, ...]) -> list[Any]: ...
        async def _may_write(self) -> None: ...

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
        held = self._mem.held(tenant, self._clock())
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

    async def ledger_entry(self, tenant: str, entry_id: str) -> LedgerEntry | None:
        sql = f"SELECT {ops.ENTRY_COLUMNS} FROM ledger WHERE tenant = ? AND id = ?"
        rows = self._rows(sql, (tenant, entry_id))
        return ops.entry_from_row(rows[0]) if rows else None

    async def ledger_range(
        self, tenant: str, *, since: float, until: float, limit: int, after: str | None = None
    ) -> LedgerPage:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        entries, more = self._read(
            lambda conn: ops.ledger_range(conn, tenant, since, until, limit, after)
        )
        return LedgerPage(entries=entries, has_more=more)
