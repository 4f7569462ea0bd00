"""Fixtures of the end-to-end tests: one simulator gateway per module and clients of it, a
private durable Redis per test (`redis_server`; `store_url` runs a test on it and on SQLite),
and `backup`, the OpenAI-compatible server a test of another upstream falls back to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.fakes.openai_upstream import FakeOpenAI
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.redis_server import RedisServer
from tests.support.routing_files import SIMULATOR_CONFIG


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One embedded-default gateway (SQLite, simulator) per test module."""
    process = start_gateway(tmp_path_factory.mktemp("gw"), SIMULATOR_CONFIG)
    yield process
    process.stop()


@pytest.fixture
def client(gateway: GatewayProcess) -> Iterator[openai.OpenAI]:
    assert gateway.api_key, "serve printed no key"
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def redis_server(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server that acknowledges only what is on disk (`durable`), for one test
    to pause, kill and restart."""
    with RedisServer.running(redis_binary, tmp_path / "redis", durable=True) as server:
        yield server


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """The store of the gateways of a test: the embedded SQLite file in their data folder
    (None), or a private durable Redis."""
    if request.param == "sqlite":
        return None
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url


@pytest.fixture(scope="module")
def backup() -> Iterator[FakeOpenAI]:
    """The OpenAI-compatible server a test of another upstream falls back to (its routing
    tables: `tests.support.routing_files.backup_chat`)."""
    fake = FakeOpenAI(text="Hello from the backup server.")
    _, stop = fake.start_in_thread()
    yield fake
    stop()
