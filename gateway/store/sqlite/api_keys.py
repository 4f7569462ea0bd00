"""The SQLite store's API-key area: key records in the file (the CLI issues and revokes).

A row is one key: its current secret's hash, and after a rotation the old secret's hash with
the end of its grace (`previous_hash`, `previous_until`); its settings are one msgpack blob.
The records this process looked up are kept while the file says nothing changed
(`key_cache.py`).

`last_used_at` is in the file, so every process on it answers the same time: an
admission's time, written by the process that admitted it at most once a minute per key
(`USE_RECORD_SECONDS`), in the transaction of its loop turn's settlements (`coalesce.py`), never
lowered (`MAX`). The request path thus adds no write per call, and the time read is at most a
minute older than the key's latest admission.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from gateway.clock import Clock
from gateway.store.base import ApiKeyRecord, KeySettings
from gateway.store.periods import BudgetPeriod
from gateway.store.sqlite import ops
from gateway.store.sqlite.coalesce import Coalescer
from gateway.store.sqlite.key_cache import KeyCache
from gateway.store.sqlite.memory import Memory

__all__ = ["USE_RECORD_SECONDS", "SqliteKeyArea"]

_T = TypeVar("_T")

_COLUMNS = "key_id, tenant, created_at, revoked_at, prefix, settings, last_used_at"
_BY_HASH = f"SELECT {_COLUMNS} FROM api_keys WHERE key_hash = ?"
_BY_PREVIOUS_HASH = f"SELECT {_COLUMNS}, previous_until FROM api_keys WHERE previous_hash = ?"
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(KeySettings)
_NO_SETTINGS = KeySettings()
_RECORD_USE = (
    "UPDATE api_keys SET last_used_at = MAX(COALESCE(last_used_at, 0), ?) WHERE key_id = ?"
)

USE_RECORD_SECONDS = 60.0
"""How often one process writes a key's last use to the file, at most."""


class SqliteKeyArea:
    """The API-key operations of `SqliteStore` (a mixin: the store has the connection, the
    clock and the cache of looked-up keys)."""

    _clock: Clock
    _keys: KeyCache[ApiKeyRecord]
    _mem: Memory
    _settles: Coalescer

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
                f"INSERT OR REPLACE INTO api_keys (key_hash, {_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key_hash,
                    record.key_id,
                    record.tenant,
                    record.created_at,
                    record.revoked_at,
                    record.prefix,
                    _blob(record.settings),
                    record.last_used_at,
                ),
            )
        )

    async def get_key(self, key_hash: str, tag: str | None = None) -> ApiKeyRecord | None:
        now, cache = self._clock(), self._keys

        def lookup(conn: sqlite3.Connection) -> ApiKeyRecord | None:
            (version,) = conn.execute("PRAGMA data_version").fetchone()
            kept, record = cache.get(key_hash, version, now)
            if kept:
                return record
            row = conn.execute(_BY_HASH, (key_hash,)).fetchone()
            if row is not None:
                record = self._record(row)
            else:
                row = conn.execute(_BY_PREVIOUS_HASH, (key_hash,)).fetchone()
                record = self._record(row[:-1], valid_until=row[-1]) if row else None
            cache.put(key_hash, record, version, now)
            return record

        return self._read(lookup)

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
        revoked = self._write(body)
        self._keys.forget()  # by id, so every kept record: refused from the next request on
        return revoked

    async def update_key(self, key_id: str, settings: KeySettings) -> ApiKeyRecord | None:
        await self._may_write()
        self._write(
            lambda conn, _now: conn.execute(
                "UPDATE api_keys SET settings = ? WHERE key_id = ?", (_blob(settings), key_id)
            )
        )
        self._keys.forget()  # by id, so every kept record: the new settings from the next request
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
        self._keys.forget()  # the old secret's record gains its grace's end
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

    def _note_use(self, key_id: str, now: float) -> None:
        """An admission took the key: its time goes to the file when this process last wrote
        the key's use `USE_RECORD_SECONDS` or more ago (a write that fails is made again by the
        key's next admission)."""
        recorded = self._mem.use_recorded
        last = recorded.get(key_id)
        if last is not None and now - last < USE_RECORD_SECONDS:
            return
        recorded[key_id] = now

        def write(conn: sqlite3.Connection, _now: float) -> None:
            conn.execute(_RECORD_USE, (now, key_id))

        def written(future: asyncio.Future[None]) -> None:
            failed = future.cancelled() or future.exception() is not None
            if failed and recorded.get(key_id) == now:
                del recorded[key_id]

        self._settles.submit(write).add_done_callback(written)

    def _record(self, row: Any, *, valid_until: float | None = None) -> ApiKeyRecord:
        key_id, tenant, created_at, revoked_at, prefix, settings, last_used_at = row
        return ApiKeyRecord(
            key_id=key_id,
            tenant=tenant,
            created_at=created_at,
            revoked_at=revoked_at,
            prefix=prefix,
            settings=_decoder.decode(settings) if settings is not None else _NO_SETTINGS,
            valid_until=valid_until,
            last_used_at=last_used_at,
        )


def _blob(settings: KeySettings) -> bytes | None:
    return None if settings == _NO_SETTINGS else _encoder.encode(settings)
