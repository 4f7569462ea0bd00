"""Key records the SQLite store looked up, kept in process while nothing can have changed them.

A request's key lookup was one statement on the file per request. A record (or its absence) is
kept here for at most `KEY_CACHE_SECONDS`, and only while the file's `PRAGMA data_version` is
the one it was read at: SQLite changes that number whenever another connection (the CLI,
another process) commits, so a key revoked or created elsewhere is seen by the next request,
as before. This process's own writes do not change it, so the store forgets what it writes
(`forget`). A record is never kept past its own end (`ends_of`: an `expires_at` on it or on its
`settings`, a `valid_until`; wall-clock seconds, the store's clock). The record type is the
store's; nothing here reads more of it than those.
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["KEY_CACHE_SECONDS", "KeyCache", "ends_of"]

R = TypeVar("R")

KEY_CACHE_SECONDS = 1.0
"""The longest a looked-up record is trusted (the same bound a Redis replica keeps)."""
_MAX_ENTRIES = 10_000


class KeyCache(Generic[R]):
    """key hash -> (record or None, the data_version it was read at, trusted until)."""

    __slots__ = ("_entries", "_seconds")

    def __init__(self, seconds: float = KEY_CACHE_SECONDS) -> None:
        self._seconds = seconds
        self._entries: dict[str, tuple[R | None, int, float]] = {}

    def get(self, key_hash: str, version: int, now: float) -> tuple[bool, R | None]:
        """(True, record) when a record read at `version` is still trusted at `now`."""
        entry = self._entries.get(key_hash)
        if entry is None or entry[1] != version or now >= entry[2]:
            return False, None
        return True, entry[0]

    def put(self, key_hash: str, record: R | None, version: int, now: float) -> None:
        if self._seconds <= 0:
            return
        until = now + self._seconds
        ends = ends_of(record)
        if ends is not None:
            until = min(until, ends)
        if len(self._entries) >= _MAX_ENTRIES:
            self._entries.clear()
        self._entries[key_hash] = (record, version, until)

    def forget(self, key_hash: str | None = None) -> None:
        """Drop one record (None: all), after this process wrote it."""
        if key_hash is None:
            self._entries.clear()
        else:
            self._entries.pop(key_hash, None)


def ends_of(record: object) -> float | None:
    """When `record` stops being valid by itself, or None: the earliest of an `expires_at` on
    it or on its `settings` and a `valid_until` (a rotated secret's grace)."""
    settings = getattr(record, "settings", None)
    ends = [
        float(t)
        for t in (
            getattr(record, "expires_at", None),
            getattr(settings, "expires_at", None),
            getattr(record, "valid_until", None),
        )
        if t is not None
    ]
    return min(ends) if ends else None
