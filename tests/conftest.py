"""Session-wide fixtures shared by every test package.

`redis_binary`: the redis-server binary, for tests that run (and stop) a Redis of their own.
`redis_url`: a real Redis for the whole session. `REDIS_URL` when set; otherwise a private
`redis-server` on a free port (no persistence) started here and stopped at the end. Without
either, Redis tests skip locally and fail on CI (`CI=true`), where a missing Redis is a bug.
Tests isolate themselves with a key prefix of their own (see tests/store/conftest.py).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.support.redis_server import RedisServer

__all__ = ["redis_binary", "redis_url"]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Redis is required on CI: {reason}")
    pytest.skip(f"no Redis: {reason}")


@pytest.fixture(scope="session")
def redis_binary() -> str:
    """The redis-server binary; skips locally and fails on CI when there is none."""
    binary = shutil.which("redis-server")
    if binary is None:
        _unavailable("there is no redis-server binary")
        raise AssertionError("unreachable")
    return binary


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a Redis that answers, for the whole session."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        _unavailable("REDIS_URL is not set and there is no redis-server binary")
        return
    server = RedisServer(binary, tmp_path_factory.mktemp("redis"))
    try:
        server.start()
    except (OSError, RuntimeError) as exc:
        _unavailable(f"could not start redis-server: {exc}")
        return
    try:
        yield server.url
    finally:
        server.stop()
