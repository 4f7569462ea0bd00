"""The SQLite store keeps the key records it looked up: a request's key costs no statement on
the table while the file says nothing changed, for at most `KEY_CACHE_SECONDS`, never past a
record's `expires_at`; a revocation through this store or through another connection on the
file (the CLI) is seen by the next lookup."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.store.base import ApiKeyRecord
from gateway.store.sqlite import SqliteStore
from gateway.store.sqlite.key_cache import KEY_CACHE_SECONDS, KeyCache
from tests.store.support import Run
from tests.support.clock import Clock

RECORD = ApiKeyRecord(key_id="kid1", tenant="t1", created_at=1.0)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, run: Run, clock: Clock) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "g.db", clock=clock)
    run(s.open())
    yield s
    run(s.close())


@pytest.fixture
def table_reads(store: SqliteStore) -> list[str]:
    """The statements on `api_keys` the store's connection runs from now on."""
    seen: list[str] = []
    store._db.set_trace_callback(lambda sql: seen.append(sql) if "FROM api_keys" in sql else None)
    return seen


def test_a_looked_up_key_is_kept_until_the_bound(
    store: SqliteStore, run: Run, clock: Clock, table_reads: list[str]
) -> None:
    run(store.create_key(RECORD, "hash1"))
    for _ in range(3):
        assert run(store.get_key("hash1")) == RECORD
    assert len(table_reads) == 1
    clock.advance(KEY_CACHE_SECONDS)
    assert run(store.get_key("hash1")) == RECORD
    assert len(table_reads) == 2


def test_a_revocation_through_this_store_is_seen_at_once(store: SqliteStore, run: Run) -> None:
    run(store.create_key(RECORD, "hash1"))
    assert run(store.get_key("hash1")) == RECORD
    assert run(store.revoke_key("kid1"))
    revoked = run(store.get_key("hash1"))
    assert revoked is not None and revoked.revoked_at is not None


def test_another_connection_revoking_or_creating_is_seen_at_once(
    tmp_path: Path, store: SqliteStore, run: Run
) -> None:
    cli = SqliteStore(tmp_path / "g.db")
    run(cli.open())
    try:
        assert run(store.get_key("hash1")) is None  # an unknown key is kept too...
        run(cli.create_key(RECORD, "hash1"))
        assert run(store.get_key("hash1")) == RECORD  # ...until the file changes
        assert run(cli.revoke_key("kid1"))
        revoked = run(store.get_key("hash1"))
        assert revoked is not None and revoked.revoked_at is not None
    finally:
        run(cli.close())


def test_a_key_created_through_this_store_is_found_at_once(store: SqliteStore, run: Run) -> None:
    assert run(store.get_key("hash1")) is None
    run(store.create_key(RECORD, "hash1"))
    assert run(store.get_key("hash1")) == RECORD


@dataclass(frozen=True)
class _Settings:
    expires_at: float | None = None


@dataclass(frozen=True)
class _Expiring:
    key_id: str
    expires_at: float | None = None
    valid_until: float | None = None
    settings: _Settings = _Settings()


def test_a_record_is_never_kept_past_its_own_end() -> None:
    cache: KeyCache[_Expiring] = KeyCache(seconds=10.0)
    records = {
        "expires": _Expiring("a", expires_at=100.5),
        "settings": _Expiring("b", settings=_Settings(expires_at=100.5)),
        "grace": _Expiring("c", valid_until=100.5, settings=_Settings(expires_at=105.0)),
    }
    for name, record in records.items():
        cache.put(name, record, version=1, now=100.0)
        assert cache.get(name, 1, 100.4) == (True, record)
        assert cache.get(name, 1, 100.5) == (False, None)
    never = _Expiring("d")
    cache.put("never", never, version=1, now=100.0)
    assert cache.get("never", 1, 109.9) == (True, never)
    assert cache.get("never", 1, 110.0) == (False, None)
    assert cache.get("never", 2, 100.0) == (False, None)  # the file changed since
