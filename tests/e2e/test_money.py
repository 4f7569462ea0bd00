"""Wallet, charges, holds and idempotency as a client meets them, on the embedded store."""

from __future__ import annotations

import threading
import time
from decimal import Decimal

import httpx
import openai

from tests.support.gateway_process import GatewayProcess
from tests.support.waiting import wait_until

MESSAGES = [{"role": "user", "content": "Write a short poem about rivers."}]


def headers_for(key: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **extra}


def wallet(gateway: GatewayProcess, key: str) -> dict[str, str]:
    response = httpx.get(f"{gateway.base_url}/wallet", headers=headers_for(key))
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def ledger(gateway: GatewayProcess, key: str) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    after = None
    while True:
        params = {"limit": "2", **({"after": after} if after else {})}
        page = httpx.get(
            f"{gateway.base_url}/wallet/ledger", params=params, headers=headers_for(key)
        ).json()
        entries += page["data"]
        if not page["has_more"]:
            return entries
        after = page["next_after"]


def test_starting_grant_and_wallet_shape(gateway: GatewayProcess) -> None:
    view = wallet(gateway, gateway.api_key or "")
    assert view["object"] == "wallet"
    assert view["credits_per_usd_rate"] == "1000"
    assert Decimal(view["balance_credits"]) > 0
    assert len(view["balance_credits"].split(".")[1]) == 4


def test_charges_match_usage_and_the_ledger_sums_to_the_balance(gateway: GatewayProcess) -> None:
    key = gateway.new_key("poor")
    gateway.grant("poor", "25")
    before = Decimal(wallet(gateway, key)["balance_credits"])
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        completion = client.chat.completions.create(model="sim-chat-1", messages=MESSAGES)
    assert completion.usage is not None
    usage = completion.usage
    # sim-chat-1 in the test config: 5 / 15 USD per million tokens, markup 1200.
    expected = Decimal(usage.prompt_tokens) * 5 + Decimal(usage.completion_tokens) * 15
    expected = (expected / 1_000_000 * 1200).quantize(Decimal("0.0001"))
    assert Decimal((usage.model_extra or {})["credits"]) == expected
    after = Decimal(wallet(gateway, key)["balance_credits"])
    assert before - after == expected
    entries = ledger(gateway, key)
    assert entries[0]["kind"] == "charge"
    assert Decimal(str(entries[0]["amount_credits"])) == -expected
    assert sum(Decimal(str(e["amount_credits"])) for e in entries) == after
    assert Decimal(str(entries[0]["balance_after_credits"])) == after


def test_insufficient_credits_is_402_and_costs_nothing(gateway: GatewayProcess) -> None:
    key = gateway.new_key("poor")
    balance = wallet(gateway, key)["balance_credits"]
    if Decimal(balance) != 0:
        gateway.cli(
            "credits",
            "adjust",
            "--tenant",
            "poor",
            "--amount",
            f"{-Decimal(balance)}",
            "--reason",
            "drain",
        )
    body = {"model": "sim-chat-1", "messages": MESSAGES, "max_tokens": 250}
    response = httpx.post(
        f"{gateway.base_url}/chat/completions", json=body, headers=headers_for(key)
    )
    assert response.status_code == 402
    error = response.json()["error"]
    assert error["code"] == "insufficient_credits"
    details = {d["field"]: d["message"] for d in error["details"]}
    assert details["available_credits"] == "0.0000"
    assert Decimal(details["hold_credits"]) > 0  # what the call needed
    # the output limit as the client named it (the legacy max_tokens here)
    assert "max_tokens" in details and "smaller max_tokens" in error["message"]
    assert wallet(gateway, key)["balance_credits"] == "0.0000"
    assert ledger(gateway, key)[0]["kind"] == "adjustment"


def test_idempotent_chat_is_replayed_and_charged_once(gateway: GatewayProcess) -> None:
    key = gateway.api_key or ""
    url = f"{gateway.base_url}/chat/completions"
    body = {"model": "sim-chat-1", "messages": MESSAGES}
    first = httpx.post(url, json=body, headers=headers_for(key, **{"Idempotency-Key": "idem-1"}))
    balance = wallet(gateway, key)["balance_credits"]
    second = httpx.post(url, json=body, headers=headers_for(key, **{"Idempotency-Key": "idem-1"}))
    assert first.status_code == second.status_code == 200
    assert second.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert second.json() == first.json()
    assert wallet(gateway, key)["balance_credits"] == balance
    reordered = {"messages": MESSAGES, "model": "sim-chat-1"}
    third = httpx.post(
        url, json=reordered, headers=headers_for(key, **{"Idempotency-Key": "idem-1"})
    )
    assert third.headers["idempotent-replayed"] == "true"
    other = httpx.post(
        url,
        json={**body, "max_tokens": 3},
        headers=headers_for(key, **{"Idempotency-Key": "idem-1"}),
    )
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"


def test_failed_call_releases_the_idempotency_key(gateway: GatewayProcess) -> None:
    key = gateway.api_key or ""
    url = f"{gateway.base_url}/chat/completions"
    failing = {
        "model": "sim-chat-1",
        "messages": [{"role": "user", "content": "x [[sim:fail=503]]"}],
    }
    headers = headers_for(key, **{"Idempotency-Key": "idem-fail"})
    assert httpx.post(url, json=failing, headers=headers).status_code == 503
    again = httpx.post(url, json=failing, headers=headers)
    assert again.status_code == 503
    assert "idempotent-replayed" not in again.headers


def test_streamed_reply_is_replayed_as_a_stream(gateway: GatewayProcess) -> None:
    key = gateway.api_key or ""
    url = f"{gateway.base_url}/chat/completions"
    body = {
        "model": "sim-chat-1",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = headers_for(key, **{"Idempotency-Key": "idem-stream"})
    first = httpx.post(url, json=body, headers=headers)
    second = httpx.post(url, json=body, headers=headers)
    assert second.headers["content-type"].startswith("text/event-stream")
    assert second.headers["idempotent-replayed"] == "true"
    assert second.text == first.text
    assert second.text.endswith("data: [DONE]\n\n")


def test_concurrent_same_key_is_in_progress(gateway: GatewayProcess) -> None:
    key = gateway.api_key or ""
    url = f"{gateway.base_url}/chat/completions"
    body = {"model": "sim-slow", "messages": MESSAGES, "max_tokens": 40}
    headers = headers_for(key, **{"Idempotency-Key": "idem-slow"})
    results: list[httpx.Response] = []
    worker = threading.Thread(
        target=lambda: results.append(httpx.post(url, json=body, headers=headers, timeout=30))
    )
    worker.start()
    wait_until(  # the first call is in flight: its hold is on the wallet
        lambda: Decimal(wallet(gateway, key)["held_credits"]) > 0, what="the first call's hold"
    )
    during = httpx.post(url, json=body, headers=headers)
    worker.join()
    assert during.status_code == 409
    assert during.json()["error"]["code"] == "idempotency_request_in_progress"
    assert during.json()["error"]["retryable"] is True
    assert results[0].status_code == 200


def test_abandoned_stream_is_charged_once_for_what_was_produced(gateway: GatewayProcess) -> None:
    key = gateway.new_key("default")
    url = f"{gateway.base_url}/chat/completions"
    body = {"model": "sim-slow", "messages": MESSAGES, "stream": True, "max_tokens": 300}
    before = len(ledger(gateway, key))
    with httpx.stream("POST", url, json=body, headers=headers_for(key), timeout=30) as response:
        assert response.status_code == 200
        seen = 0
        for line in response.iter_lines():
            if line.startswith("data: "):
                seen += 1
            if seen >= 5:
                break
    entries = wait_until(
        lambda: ledger(gateway, key), lambda now: len(now) > before, what="the stream's charge"
    )
    charges = entries[: len(entries) - before]
    assert len(charges) == 1
    assert charges[0]["kind"] == "charge"
    assert Decimal(str(charges[0]["amount_credits"])) < 0
    time.sleep(0.5)  # the behaviour under test: a while later, still that one charge
    assert len(ledger(gateway, key)) == len(entries)
    view = wallet(gateway, key)
    assert view["held_credits"] == "0.0000"
