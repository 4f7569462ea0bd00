"""The SQLite store's artifact area: stored media metadata (the bytes are in blob storage)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.store.tasks import ArtifactRecord

__all__ = ["SqliteArtifactArea"]

_T = TypeVar("_T")

_FIELDS = tuple(ArtifactRecord.__struct_fields__)
_COLUMNS = ", ".join(_FIELDS)
_INSERT = f"INSERT OR REPLACE INTO artifacts ({_COLUMNS}) VALUES ({', '.join('?' * len(_FIELDS))})"


class SqliteArtifactArea:
    """The artifact operations of `SqliteStore` (a mixin: the store has the connection)."""

    if TYPE_CHECKING:

        def _write(self, body: Callable[[sqlite3.Connection, float], _T]) -> _T: ...
        def _rows(self, sql: str, params: tuple[object, ...]) -> list[Any]: ...
        async def _may_write(self) -> None: ...

    async def create_artifact(self, record: ArtifactRecord) -> None:
        values = tuple(getattr(record, name) for name in _FIELDS)
        await self._may_write()
        self._write(lambda conn, _now: conn.execute(_INSERT, values))

    async def get_artifact(self, tenant: str | None, artifact_id: str) -> ArtifactRecord | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM artifacts WHERE artifact_id = ?", (artifact_id,))
        record = _record(rows[0]) if rows else None
        return record if record is not None and tenant in (None, record.tenant) else None

    async def expired_artifacts(self, now: float, limit: int) -> list[ArtifactRecord]:
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM artifacts WHERE expires_at <= ? ORDER BY expires_at LIMIT ?",
            (now, limit),
        )
        return [_record(row) for row in rows]

    async def delete_artifact(self, artifact_id: str) -> None:
        await self._may_write()
        self._write(
            lambda conn, _now: conn.execute(
                "DELETE FROM artifacts WHERE artifact_id = ?", (artifact_id,)
            )
        )


def _record(row: tuple[Any, ...]) -> ArtifactRecord:
    return ArtifactRecord(**dict(zip(_FIELDS, row, strict=True)))
