"""A media gateway per test module, on SQLite and on Redis (`store_kind`), with clients of two
tenants."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.media.support import redis_db, start_media_gateway
from tests.e2e.media_support import root_of
from tests.support.gateway_process import GatewayProcess, client_for


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def media_gateway(
    store_kind: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    store_url = redis_db(request, 11) if store_kind == "redis" else None
    process = start_media_gateway(tmp_path_factory.mktemp("media"), store_url)
    try:
        process.grant("default", "20000")
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def api(media_gateway: GatewayProcess) -> Iterator[httpx.Client]:
    """A client of tenant `default`."""
    with client_for(media_gateway, media_gateway.api_key or "", timeout=15) as client:
        yield client


@pytest.fixture(scope="module")
def other_api(media_gateway: GatewayProcess) -> Iterator[httpx.Client]:
    media_gateway.grant("other", "1000")
    with client_for(media_gateway, media_gateway.new_key("other"), timeout=15) as client:
        yield client


@pytest.fixture(scope="module")
def root(media_gateway: GatewayProcess) -> str:
    return root_of(media_gateway.base_url)
