"""store_from_url: the scheme picks the backend; paths resolve as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.store.factory import store_from_url
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore
from tests.store.support import Run


def test_relative_sqlite_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Run) -> None:
    monkeypatch.chdir(tmp_path)
    store = store_from_url("sqlite:///data/gateway.db")
    assert isinstance(store, SqliteStore)
    run(store.open())
    run(store.close())
    assert (tmp_path / "data" / "gateway.db").is_file()


def test_absolute_sqlite_path_creates_the_folder(tmp_path: Path, run: Run) -> None:
    target = tmp_path / "deep" / "er" / "gateway.db"
    store = store_from_url(f"sqlite:///{target}")  # an absolute path gives four slashes
    assert isinstance(store, SqliteStore) and Path(store.path) == target
    run(store.open())
    run(store.close())
    assert target.is_file()


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "rediss://cache.internal:6380/2"])
def test_redis_urls(url: str) -> None:
    store = store_from_url(url)
    assert isinstance(store, RedisStore) and store.url == url


@pytest.mark.parametrize("url", ["postgres://db/gw", "gateway.db", "sqlite:///", "sqlite://x.db"])
def test_unusable_urls_are_rejected(url: str) -> None:
    with pytest.raises(ValueError, match="store URL"):
        store_from_url(url)
