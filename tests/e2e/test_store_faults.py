"""Money and availability when the store stalls or dies, as clients meet it.

A private redis-server is paused (SIGSTOP) or killed and restarted under a steady stream of
chat calls: sync and streaming, with and without Idempotency-Key. Every call carries its own
X-Request-Id, which the ledger keeps on each charge, so each answer can be matched to what was
charged for it:
- an answer that says the call failed was never charged;
- a completed call was charged exactly once; a stream ends with `[DONE]` or an error event,
  never cut short;
- a few seconds after the store is back nothing is held, and a failed call's key runs again
  (no 409); the wallet equals the sum of its ledger.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.redis_server import RedisServer
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until

pytestmark = STORE_FAULTS

CONFIG = """
[gateway]
hold_seconds = 900

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.sim]
kind = "simulator"
tokens_per_second = 400

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
max_output_tokens = 64
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[tenants.payer]
"""
MODES = ("sync", "stream", "sync-key", "stream-key")


@dataclass
class Outcome:
    request_id: str
    mode: str
    status: int
    key: str | None
    body: dict[str, object]
    text: str = ""

    @property
    def streamed(self) -> bool:
        return self.mode.startswith("stream") and self.status == 200

    @property
    def done(self) -> bool:
        return self.text.rstrip().endswith("data: [DONE]")

    @property
    def error_event(self) -> bool:
        return '"error"' in self.text.rsplit("data: ", 1)[-1]


@pytest.fixture
def gateway(redis_server: RedisServer, tmp_path: Path) -> Iterator[tuple[GatewayProcess, str]]:
    process = start_gateway(tmp_path / "gw", CONFIG, store_url=redis_server.url)
    key = process.new_key("payer")
    process.grant("payer", "100000")
    yield process, key
    process.stop()


def _call(client: httpx.Client, url: str, key: str, outcome: Outcome) -> None:
    headers = {"Authorization": f"Bearer {key}", "X-Request-Id": outcome.request_id}
    if outcome.key:
        headers["Idempotency-Key"] = outcome.key
    try:
        if outcome.mode.startswith("stream"):
            with client.stream("POST", url, json=outcome.body, headers=headers) as response:
                outcome.status = response.status_code
                outcome.text = response.read().decode()
        else:
            response = client.post(url, json=outcome.body, headers=headers)
            outcome.status, outcome.text = response.status_code, response.text
    except httpx.HTTPError as exc:
        outcome.status, outcome.text = -1, repr(exc)


def _load(
    gateway: GatewayProcess, key: str, label: str, stop: threading.Event, outcomes: list[Outcome]
) -> None:
    """Calls started every 20 ms (an open loop: a stalled call does not hold the next one back)
    until `stop`, modes taking turns, each added to `outcomes`; returns once all have ended."""
    url = f"{gateway.base_url}/chat/completions"
    local = threading.local()
    clients: list[httpx.Client] = []

    def call(outcome: Outcome) -> None:
        if not hasattr(local, "client"):
            local.client = httpx.Client(timeout=60)
            clients.append(local.client)
        _call(local.client, url, key, outcome)

    with ThreadPoolExecutor(max_workers=48) as pool:
        i = 0
        while not stop.is_set():
            mode = MODES[i % len(MODES)]
            request_id = f"{label}-{i}"
            body = {
                "model": "sim-chat-1",
                "messages": [{"role": "user", "content": f"Tell me about {request_id}"}],
                "stream": mode.startswith("stream"),
            }
            idem = f"key-{request_id}" if mode.endswith("key") else None
            outcome = Outcome(request_id, mode, 0, idem, body)
            outcomes.append(outcome)
            pool.submit(call, outcome)
            i += 1
            stop.wait(0.02)
    for client in clients:
        client.close()


def _answered(outcomes: list[Outcome], since: int = 0) -> int:
    """How many of the calls started since the `since`-th have been answered 200."""
    return sum(o.status == 200 for o in outcomes[since:])


def _run_with_fault(
    gateway: GatewayProcess, key: str, label: str, fault: Callable[[], None]
) -> list[Outcome]:
    stop = threading.Event()
    outcomes: list[Outcome] = []
    loader = threading.Thread(target=_load, args=(gateway, key, label, stop, outcomes))
    loader.start()
    try:
        wait_until(lambda: _answered(outcomes) >= 40, what="calls answered before the fault")
        fault()
        after = len(outcomes)
        wait_until(lambda: _answered(outcomes, after) >= 80, what="calls answered after it")
    finally:
        stop.set()
        loader.join(timeout=120)
    return outcomes


def _ledger(gateway: GatewayProcess, key: str) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    after = None
    headers = {"Authorization": f"Bearer {key}"}
    while True:
        params = {"limit": "100", **({"after": after} if after else {})}
        page = httpx.get(f"{gateway.base_url}/wallet/ledger", params=params, headers=headers)
        assert page.status_code == 200, page.text
        entries += page.json()["data"]
        if not page.json()["has_more"]:
            return entries
        after = page.json()["next_after"]


def _wallet(gateway: GatewayProcess, key: str) -> dict[str, str]:
    response = httpx.get(
        f"{gateway.base_url}/wallet", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _wait_until_nothing_held(gateway: GatewayProcess, key: str) -> None:
    def held() -> Decimal | None:
        try:
            return Decimal(_wallet(gateway, key)["held_credits"])
        except (httpx.HTTPError, AssertionError):
            return None  # the store (or the gateway's view of it) not back yet

    wait_until(held, lambda now: now == 0, timeout=15, what="the holds of failed calls released")


def _check_money(gateway: GatewayProcess, key: str, outcomes: list[Outcome]) -> None:
    _wait_until_nothing_held(gateway, key)
    entries = _ledger(gateway, key)
    charges: dict[str, int] = {}
    for entry in entries:
        if entry["kind"] == "charge":
            request_id = str(entry["request_id"])
            charges[request_id] = charges.get(request_id, 0) + 1
    failed = [o for o in outcomes if o.status != 200]
    assert failed, "the fault produced no failed call: the test proved nothing"
    assert any(o.status == 200 for o in outcomes)
    for outcome in outcomes:
        count = charges.get(outcome.request_id, 0)
        if outcome.status != 200:
            assert count == 0, f"{outcome.mode} answered {outcome.status} but charged"
            assert outcome.status == -1 or '"retryable":true' in outcome.text
        elif outcome.streamed and not outcome.done:
            assert outcome.error_event, f"stream cut short: {outcome.text[-200:]}"
            assert count <= 1, "a broken stream is charged for what it produced, once"
        else:
            assert count == 1, f"{outcome.mode} answered 200, charged {count} times"
    balance = Decimal(_wallet(gateway, key)["balance_credits"])
    assert balance == sum(Decimal(str(e["amount_credits"])) for e in entries)


def _check_keys_run_again(gateway: GatewayProcess, key: str, outcomes: list[Outcome]) -> None:
    """Failed calls' Idempotency-Keys are free again: a retry runs (or replays), no 409."""
    failed = [o for o in outcomes if o.key and o.status != 200]
    assert failed, "no keyed call failed during the fault"
    with httpx.Client(timeout=30) as client:
        for outcome in failed[:: max(1, len(failed) // 20)]:  # a spread of up to ~20
            again = Outcome(
                f"{outcome.request_id}-retry", outcome.mode, 0, outcome.key, outcome.body
            )
            _call(client, f"{gateway.base_url}/chat/completions", key, again)
            assert again.status == 200, again.text


def test_a_stalled_store_never_charges_a_failed_call(
    gateway: tuple[GatewayProcess, str], redis_server: RedisServer
) -> None:
    process, key = gateway
    health_during: list[httpx.Response] = []

    def stall() -> None:
        redis_server.pause()
        try:
            time.sleep(1.0)  # the store away for a second before /health is asked
            health_during.append(httpx.get(f"{process.base_url}/health", timeout=2.0))
            time.sleep(4.0)  # longer than the store's 2 s timeout, and its one retry
        finally:
            redis_server.resume()

    outcomes = _run_with_fault(process, key, "stall", stall)
    assert health_during[0].status_code == 503
    assert health_during[0].json()["status"] == "degraded"
    assert httpx.get(f"{process.base_url}/health", timeout=2.0).status_code == 200
    _check_money(process, key, outcomes)
    _check_keys_run_again(process, key, outcomes)


def test_a_killed_and_restarted_store_never_charges_a_failed_call(
    gateway: tuple[GatewayProcess, str], redis_server: RedisServer
) -> None:
    process, key = gateway

    def crash() -> None:
        redis_server.kill()
        time.sleep(2.0)  # the behaviour under test: the store down for 2 s
        redis_server.start()

    outcomes = _run_with_fault(process, key, "crash", crash)
    _check_money(process, key, outcomes)
    _check_keys_run_again(process, key, outcomes)
