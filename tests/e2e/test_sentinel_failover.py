"""A gateway behind Sentinel (a primary, a replica, three sentinels) under chat and image-task
load: the primary gets `kill -9`, the sentinels promote the replica, and the gateway follows the
new primary with no restart; the killed node comes back as its replica. What must hold of the
answers: `tests/e2e/failover_load.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.failover_load import Load, check_books
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.redis_sentinel import LocalSentinel
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until

pytestmark = STORE_FAULTS


@pytest.fixture
def sentinel(redis_binary: str, tmp_path: Path) -> Iterator[LocalSentinel]:
    with LocalSentinel.running(redis_binary, tmp_path / "sentinel") as running:
        yield running


@pytest.fixture
def gateway(sentinel: LocalSentinel, tmp_path: Path) -> Iterator[GatewayProcess]:
    started = start_gateway(tmp_path / "gw", MEDIA_CONFIG, store_url=sentinel.url)
    try:
        yield started
    finally:
        started.stop()


def test_the_gateway_follows_the_new_primary_and_loses_no_money(
    sentinel: LocalSentinel, gateway: GatewayProcess
) -> None:
    key = gateway.new_key("default")
    gateway.grant("default", "100000")
    load = Load([gateway], key, "sf")
    load.start()
    try:
        load.wait_for(40, "load before the kill")
        before = sentinel.primary_port()
        sentinel.primary.kill()
        wait_until(
            sentinel.primary_port, lambda port: port != before, timeout=30, what="a new primary"
        )
        sentinel.primary.start()  # back, as the new primary's replica
        wait_until(sentinel.replicated, timeout=30, what="the new primary's replica")
        load.wait_for(40, "load after")
    finally:
        load.finish()

    refused = check_books(gateway, key, load.answers)
    assert refused  # the window was met: calls failed until the promotion
    health = httpx.get(f"{gateway.base_url}/health", timeout=5).json()
    assert health["status"] == "ok", health
