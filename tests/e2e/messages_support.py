"""What the Messages API's end-to-end tests against an Anthropic upstream share: the routing
file (a fake Anthropic upstream behind `claude-chat`, priced with cache reads and writes), the
module fixtures (the fake, checking thinking signatures as Anthropic does, and a gateway), an
`anthropic` SDK client, and reading the wallet."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.support.gateway_process import GatewayProcess, client_for, start_gateway

__all__ = [
    "CONFIG",
    "HELLO",
    "anthropic_client",
    "last_charge",
    "messages_gateway",
    "root_of",
    "strict_upstream",
    "without_stream",
]

CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.claude]
kind = "anthropic"
base_url = "{base_url}"
api_key = "sk-ant-upstream-secret"
timeout_seconds = 5
stream_read_timeout_seconds = 5

[[models]]
id = "claude-chat"
provider = "claude"
upstream_model = "claude-sonnet-4-0"
capability = "chat"
owned_by = "anthropic"
markup = 1000
max_output_tokens = 8192
pricing = {{ input_usd_per_mtok = 3, cached_input_usd_per_mtok = 0.3, \
cache_write_usd_per_mtok = 3.75, output_usd_per_mtok = 15 }}

[routing.auto]
chat = ["claude-chat"]

[tenants.default]

[tenants.broke]

[tenants.limited]
requests_per_minute = 1
"""
HELLO: list[anthropic.types.MessageParam] = [{"role": "user", "content": "Hello"}]


def strict_upstream() -> Iterator[FakeAnthropic]:
    """A fake Anthropic upstream that checks thinking signatures, served from a thread."""
    fake = FakeAnthropic(check_thinking=True)
    _, stop = fake.start_in_thread()
    yield fake
    stop()


def messages_gateway(
    upstream: FakeAnthropic, factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """A `gateway serve` process of CONFIG in front of `upstream`."""
    workdir: Path = factory.mktemp("gw-messages")
    process = start_gateway(workdir, CONFIG.format(base_url=upstream.base_url))
    yield process
    process.stop()


def root_of(gateway: GatewayProcess) -> str:
    return gateway.base_url.removesuffix("/v1")


def anthropic_client(gateway: GatewayProcess, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=root_of(gateway), api_key=key, max_retries=0)


def without_stream(request: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in request.items() if key != "stream"}


def last_charge(gateway: GatewayProcess) -> Decimal:
    """The credits of the default tenant's latest ledger entry, a charge."""
    assert gateway.api_key
    with client_for(gateway, gateway.api_key) as http:
        entries = http.get("/v1/wallet/ledger", params={"limit": 1}).json()["data"]
    assert entries[0]["kind"] == "charge"
    return -Decimal(entries[0]["amount_credits"])
