"""A real gateway for the client and `gateway tasks` tests: the media simulator config plus
tenants whose request rate is low enough to hit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import MEDIA_CONFIG

__all__ = ["CLIENT_CONFIG", "media_gateway"]

CLIENT_CONFIG = (
    MEDIA_CONFIG
    + """
[tenants.throttled]
requests_per_minute = 1
"""
)


def media_gateway(workdir: Path) -> Iterator[GatewayProcess]:
    """A running gateway (SQLite, simulator) whose `default` tenant has 20000 credits."""
    process = start_gateway(workdir, CLIENT_CONFIG)
    try:
        if process.api_key is None:
            pytest.fail(f"serve printed no key:\n{process.logs()}")
        process.grant("default", "20000")
        yield process
    finally:
        process.stop()
