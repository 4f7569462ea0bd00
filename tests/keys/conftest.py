"""Stores for the key tests: a file of SQLite (one process), or a private redis-server that
two replicas share."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.redis_server import RedisServer


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """(store URL, how many replicas serve it)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'gateway.db'}", 1
        return
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is required"
    with RedisServer.running(binary, tmp_path / "redis") as server:
        yield server.url, 2
