"""The SQLite store's API-key area: key records in the file (the CLI issues and revokes).

A row is one key: its current secret's hash, and after a rotation the old secret's hash with
the end of its grace (`previous_hash`, `previous_until`); its settings are one msgpack blob.
`last_used_at` is this process's memory (the CLI reads none).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from gateway.clock import Clock
from gateway.store.base import ApiKeyRecord, KeySettings
from gateway.store.periods import BudgetPeriod
from gateway.store.sqlite import ops
from gateway.store.sqlite.memory import Memory

__all__ = ["SqliteKeyArea"]

_T = TypeVar("_T")

_COLUMNS = "key_id, tenant, created_at, revoked_at, prefix, settings"
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(KeySettings)
_NO_SETTINGS = KeySettings()


class SqliteKeyArea:
    """The API-key operations of `SqliteStore` (a mixin: the store has the connection)."""

    _clock: Clock
    _mem: Memory

    if TYPE_CHECKING:

        def _write(self, body: Callable[[sqlite3.Connection, float], _T]) -> _T: ...
        def _read(self, body: Callable[[sqlite3.Connection], _T]) -> _T: ...
        def _rows(self, sql: str, params: tuple[object, ...]) -> list[Any]: ...
        async def _may_write(self) -> None: ...

    async def create_key(self, record: ApiKeyRecord, key_hash: str) -> None:
        await self._may_write()
        self._write(
            lambda conn, _now: conn.execute(
                f"INSERT OR REPLACE INTO api_keys (key_hash, {_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key_hash,
                    record.key_id,
                    record.tenant,
                    record.created_at,
                    record.revoked_at,
                    record.prefix,
                    _blob(record.settings),
                ),
            )
        )

    async def get_key(self, key_hash: str, tag: str | None = None) -> ApiKeyRecord | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM api_keys WHERE key_hash = ?", (key_hash,))
        if rows:
            return self._record(rows[0])
        rows = self._rows(
            f"SELECT {_COLUMNS}, previous_until FROM api_keys WHERE previous_hash = ?",
            (key_hash,),
        )
        return self._record(rows[0][:-1], valid_until=rows[0][-1]) if rows else None

    async def key_by_id(self, key_id: str) -> ApiKeyRecord | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = ?", (key_id,))
        return self._record(rows[0]) if rows else None

    async def revoke_key(self, key_id: str) -> bool:
        def body(conn: sqlite3.Connection, now: float) -> bool:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE key_id = ?",
                (now, key_id),
            )
            return cur.rowcount > 0

        await self._may_write()
        return self._write(body)

    async def update_key(self, key_id: str, settings: KeySettings) -> ApiKeyRecord | None:
        await self._may_write()
        self._write(
            lambda conn, _now: conn.execute(
                "UPDATE api_keys SET settings = ? WHERE key_id = ?", (_blob(settings), key_id)
            )
        )
        return await self.key_by_id(key_id)

    async def rotate_key(
        self, key_id: str, key_hash: str, prefix: str, *, grace_seconds: float
    ) -> ApiKeyRecord | None:
        def body(conn: sqlite3.Connection, now: float) -> None:
            conn.execute(
                "UPDATE api_keys SET previous_hash = key_hash, previous_until = ?,"
                " key_hash = ?, prefix = ? WHERE key_id = ? AND revoked_at IS NULL",
                (now + grace_seconds, key_hash, prefix, key_id),
            )

        await self._may_write()
        self._write(body)
        record = await self.key_by_id(key_id)
        return record if record is not None and record.prefix == prefix else None

    async def key_spent(self, tenant: str, key_id: str, period: BudgetPeriod) -> int:
        now = self._clock()
        return self._read(lambda conn: ops.key_spent(conn, key_id, period, now))

    async def list_keys(self, tenant: str) -> list[ApiKeyRecord]:
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM api_keys WHERE tenant = ? ORDER BY created_at, key_hash",
            (tenant,),
        )
        return [self._record(row) for row in rows]

    def _record(self, row: Any, *, valid_until: float | None = None) -> ApiKeyRecord:
        key_id, tenant, created_at, revoked_at, prefix, settings = row
        return ApiKeyRecord(
            key_id=key_id,
            tenant=tenant,
            created_at=created_at,
            revoked_at=revoked_at,
            prefix=prefix,
            settings=_decoder.decode(settings) if settings is not None else _NO_SETTINGS,
            valid_until=valid_until,
            last_used_at=self._mem.last_used.get(key_id),
        )


def _blob(settings: KeySettings) -> bytes | None:
    return None if settings == _NO_SETTINGS else _encoder.encode(settings)
