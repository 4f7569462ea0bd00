"""The SQLite store's API-key area: key records in the file (the CLI issues and revokes), and
the ones this process looked up, kept while the file says nothing changed (`key_cache.py`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.clock import Clock
from gateway.store.base import ApiKeyRecord
from gateway.store.sqlite.key_cache import KeyCache

__all__ = ["SqliteKeyArea"]

_T = TypeVar("_T")

_COLUMNS = "key_id, tenant, created_at, revoked_at, prefix"
_BY_HASH = f"SELECT {_COLUMNS} FROM api_keys WHERE key_hash = ?"


class SqliteKeyArea:
    """The API-key operations of `SqliteStore` (a mixin: the store has the connection, the
    clock and the cache of looked-up keys)."""

    _clock: Clock
    _keys: KeyCache[ApiKeyRecord]

    if TYPE_CHECKING:

        def _write(self, body: Callable[[sqlite3.Connection, float], _T]) -> _T: ...
        def _read(self, body: Callable[[sqlite3.Connection], _T]) -> _T: ...
        def _rows(self, sql: str, params: tuple[object, ...]) -> list[Any]: ...
        async def _may_write(self) -> None: ...

    async def create_key(self, record: ApiKeyRecord, key_hash: str) -> None:
        await self._may_write()
        self._keys.forget(key_hash)
        self._write(
            lambda conn, _now: conn.execute(
                f"INSERT OR REPLACE INTO api_keys (key_hash, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key_hash,
                    record.key_id,
                    record.tenant,
                    record.created_at,
                    record.revoked_at,
                    record.prefix,
                ),
            )
        )

    async def get_key(self, key_hash: str) -> ApiKeyRecord | None:
        now, cache = self._clock(), self._keys

        def lookup(conn: sqlite3.Connection) -> ApiKeyRecord | None:
            (version,) = conn.execute("PRAGMA data_version").fetchone()
            kept, record = cache.get(key_hash, version, now)
            if kept:
                return record
            row = conn.execute(_BY_HASH, (key_hash,)).fetchone()
            record = _key_record(row) if row is not None else None
            cache.put(key_hash, record, version, now)
            return record

        return self._read(lookup)

    async def key_by_id(self, key_id: str) -> ApiKeyRecord | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = ?", (key_id,))
        return _key_record(rows[0]) if rows else None

    async def revoke_key(self, key_id: str) -> bool:
        def body(conn: sqlite3.Connection, now: float) -> bool:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE key_id = ?",
                (now, key_id),
            )
            return cur.rowcount > 0

        await self._may_write()
        revoked = self._write(body)
        self._keys.forget()  # by id, so every kept record: refused from the next request on
        return revoked

    async def list_keys(self, tenant: str) -> list[ApiKeyRecord]:
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM api_keys WHERE tenant = ? ORDER BY created_at, key_hash",
            (tenant,),
        )
        return [_key_record(row) for row in rows]


def _key_record(row: Any) -> ApiKeyRecord:
    key_id, tenant, created_at, revoked_at, prefix = row
    return ApiKeyRecord(
        key_id=key_id, tenant=tenant, created_at=created_at, revoked_at=revoked_at, prefix=prefix
    )
