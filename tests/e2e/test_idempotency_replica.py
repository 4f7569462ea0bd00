"""A chat call with an Idempotency-Key whose in-flight record the replica does not acknowledge
fails retryably and charges nothing; once the replica is back the same key runs once, is
charged once, and replays after (docs/store.md, "Idempotency and failover").

`gateway serve` on a real primary and replica (money writes waiting for one replica), the
replica paused (SIGSTOP) right before the call."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.redis_replicated import ReplicatedRedis
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until

pytestmark = STORE_FAULTS

CONFIG = """
[providers.sim]
kind = "simulator"

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
max_output_tokens = 32
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[tenants.payer]
"""
BODY = {"model": "sim-chat-1", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture
def served(redis_binary: str, tmp_path: Path) -> Iterator[tuple[ReplicatedRedis, GatewayProcess]]:
    with ReplicatedRedis.running(redis_binary, tmp_path / "redis") as pair:
        gateway = start_gateway(tmp_path / "gw", CONFIG, store_url=pair.url())
        try:
            yield pair, gateway
        finally:
            gateway.stop()


def test_an_unacknowledged_key_fails_retryably_uncharged_then_runs_once(
    served: tuple[ReplicatedRedis, GatewayProcess],
) -> None:
    pair, gateway = served
    key = gateway.new_key("payer")
    gateway.grant("payer", "100")
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=gateway.base_url, headers=auth, timeout=30) as client:

        def chat(request_id: str) -> httpx.Response:
            headers = {"Idempotency-Key": "order-1", "X-Request-Id": request_id}
            return client.post("/chat/completions", json=BODY, headers=headers)

        def held() -> Decimal:
            return Decimal(client.get("/wallet").json()["held_credits"])

        pair.pause_replica()
        refused = chat("req-during")
        pair.resume_replica()
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert (error["code"], error["retryable"]) == ("store_unavailable", True)
        wait_until(held, lambda units: units == 0, what="the refused call's release")

        ran = chat("req-after")
        assert ran.status_code == 200, ran.text
        again = chat("req-again")
        assert again.status_code == 200 and again.json() == ran.json()  # a replay
        entries = client.get("/wallet/ledger", params={"limit": "100"}).json()["data"]
    charges = [e["request_id"] for e in entries if e["kind"] == "charge"]
    assert charges == ["req-after"]  # the refused call charged nothing; the key ran once
