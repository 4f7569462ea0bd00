from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.e2e.configs import SIMULATOR_CONFIG
from tests.e2e.gateway_process import GatewayProcess, start_gateway


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
