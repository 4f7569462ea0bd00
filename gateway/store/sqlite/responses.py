"""The SQLite store's area of stored Responses API responses (`gateway.store.responses`).

One row per response in `responses`: the `response` object (JSON, as answered) and the input
items (msgpack), found by (tenant, response_id). Rows share one retention, so rowid order is
expiry order: each write deletes the expired among the oldest rows (as the idempotency replies
are swept, `ops.sweep_replies`), and a read never returns an expired row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from gateway.clock import Clock
from gateway.store.responses import ItemOrder, ItemsPage, StoredResponse, page_items

__all__ = ["SqliteResponseArea"]

_T = TypeVar("_T")

_SWEEP_ROWS = 8
"""Oldest rows each write looks at: more than the one it adds, so the sweep keeps up."""
_encode_items = msgspec.msgpack.Encoder().encode
_decode_items = msgspec.msgpack.Decoder(list[dict[str, Any]]).decode
_SELECT = (
    "SELECT response, input_items, created_at, expires_at FROM responses"
    " WHERE tenant = ? AND response_id = ? AND expires_at > ?"
)
_PUT = (
    "INSERT OR REPLACE INTO responses"
    " (tenant, response_id, created_at, expires_at, response, input_items)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
_SWEEP = (
    "DELETE FROM responses WHERE rowid IN"
    " (SELECT rowid FROM responses ORDER BY rowid LIMIT ?) AND expires_at <= ?"
)


class SqliteResponseArea:
    """The stored-response operations of `SqliteStore` (a mixin: the store has the
    connection)."""

    _clock: Clock

    if TYPE_CHECKING:

        def _write(self, body: Callable[[sqlite3.Connection, float], _T]) -> _T: ...
        def _read(self, body: Callable[[sqlite3.Connection], _T]) -> _T: ...
        async def _may_write(self) -> None: ...

    async def put_response(self, record: StoredResponse) -> None:
        values = (
            record.tenant,
            record.response_id,
            record.created_at,
            record.expires_at,
            record.response,
            _encode_items(record.input_items),
        )

        def put(conn: sqlite3.Connection, now: float) -> None:
            conn.execute(_SWEEP, (_SWEEP_ROWS, now))
            conn.execute(_PUT, values)

        await self._may_write()
        self._write(put)

    async def get_response(self, tenant: str, response_id: str) -> StoredResponse | None:
        now = self._clock()
        row = self._read(lambda conn: conn.execute(_SELECT, (tenant, response_id, now)).fetchone())
        if row is None:
            return None
        response, items, created_at, expires_at = row
        return StoredResponse(
            response_id=response_id,
            tenant=tenant,
            response=bytes(response),
            input_items=_decode_items(items),
            created_at=created_at,
            expires_at=expires_at,
        )

    async def delete_response(self, tenant: str, response_id: str) -> bool:
        def delete(conn: sqlite3.Connection, now: float) -> bool:
            cursor = conn.execute(
                "DELETE FROM responses WHERE tenant = ? AND response_id = ? AND expires_at > ?",
                (tenant, response_id, now),
            )
            return cursor.rowcount > 0

        await self._may_write()
        return self._write(delete)

    async def response_input_items(
        self,
        tenant: str,
        response_id: str,
        *,
        limit: int,
        after: str | None = None,
        order: ItemOrder = "desc",
    ) -> ItemsPage | None:
        record = await self.get_response(tenant, response_id)
        if record is None:
            return None
        return page_items(record.input_items, limit=limit, after=after, order=order)
