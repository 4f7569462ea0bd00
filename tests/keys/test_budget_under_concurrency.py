"""A key's budget is part of the one admission: 40 concurrent calls across two replicas on
one Redis (one process on SQLite) never spend past it, the refusals are 402
key_budget_exceeded naming resets_at, and the tenant's other keys go on."""

from __future__ import annotations

import asyncio
import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gateway.billing.money import parse_credits
from gateway.store.periods import period_bounds
from tests.keys.gateways import auth, chat, replicas

pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

CALLS = 40


def _next_month_start() -> str:
    _, end = period_bounds("month", dt.datetime.now(dt.UTC).timestamp())
    assert end is not None
    return dt.datetime.fromtimestamp(end, dt.UTC).isoformat().replace("+00:00", "Z")


def test_concurrent_chat_calls_never_spend_past_the_key_budget(
    tmp_path: Path, backend: tuple[str, int]
) -> None:
    url, count = backend

    async def scenario() -> None:
        async with replicas(tmp_path, url, count) as gw:
            budget = "0.5000"
            key, key_id = await gw.new_key(
                name="team", models=["sim-chat-1"], budget={"credits": budget, "period": "month"}
            )
            other, other_id = await gw.new_key(name="other")

            async def one(i: int, secret: str) -> Any:
                client = gw.clients[i % len(gw.clients)]
                return await client.post("/v1/chat/completions", json=chat(), headers=auth(secret))

            answers = await asyncio.gather(
                *(one(i, key) for i in range(CALLS)), *(one(i, other) for i in range(10))
            )
            mine, theirs = answers[:CALLS], answers[CALLS:]
            assert all(a.status_code == 200 for a in theirs), [a.text for a in theirs]
            ok = [a for a in mine if a.status_code == 200]
            refused = [a for a in mine if a.status_code != 200]
            assert ok and refused
            for answer in refused:
                error = answer.json()["error"]
                assert answer.status_code == 402 and error["code"] == "key_budget_exceeded"
                assert error["retryable"] is False
                assert error["details"] == [{"field": "resets_at", "message": _next_month_start()}]

            charged = sum(Decimal(a.json()["usage"]["credits"]) for a in ok)
            ledger = await gw.ledger_of(key_id)
            spent_units = -sum(e["amount_units"] for e in ledger)
            assert len(ledger) == len(ok)  # one charge per answered call
            assert spent_units == parse_credits(str(charged)) <= parse_credits(budget)
            view = await gw.key(key_id)
            assert view["budget"]["spent"] == f"{charged:.4f}"
            assert view["budget"]["resets_at"] == _next_month_start()
            assert view["last_used_at"] is not None
            wallet = await gw.clients[-1].get("/v1/wallet", headers=auth(key))
            assert wallet.json()["key_budget"] == view["budget"]
            plain = await gw.clients[0].get("/v1/wallet", headers=auth(other))
            assert "key_budget" not in plain.json()
            assert (await gw.key(other_id))["budget"] is None

            # Metrics, summed over the replicas: spend by key id, refusals by reason.
            charged_seen, refusals = Decimal(0), 0
            for client in gw.clients:
                text = (await client.get("/metrics")).text
                assert key not in text and other not in text  # never a secret
                charged_seen += _sample(
                    text, f'gateway_key_credits_charged_total{{key_id="{key_id}"}}'
                )
                refusals += int(
                    _sample(text, 'gateway_key_refusals_total{reason="key_budget_exceeded"}')
                )
            assert charged_seen == charged and refusals == len(refused)

    asyncio.run(scenario())


def _sample(text: str, series: str) -> Decimal:
    """The value of one series in Prometheus text (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return Decimal(line.split(" ")[1]).quantize(Decimal("0.0001"))
    return Decimal(0)


def test_concurrent_task_creates_never_spend_past_it_and_a_cancel_gives_it_back(
    tmp_path: Path, backend: tuple[str, int]
) -> None:
    url, count = backend

    async def scenario() -> None:
        async with replicas(tmp_path, url, count) as gw:
            # 50 credits an image: room for two.
            key, key_id = await gw.new_key(budget={"credits": "120", "period": "day"})
            body = {"model": "image-model-2", "prompt": "a red fox"}

            async def create(i: int) -> Any:
                client = gw.clients[i % len(gw.clients)]
                return await client.post("/v1/images/generations", json=body, headers=auth(key))

            answers = await asyncio.gather(*(create(i) for i in range(CALLS)))
            made = [a for a in answers if a.status_code == 202]
            refused = [a for a in answers if a.status_code != 202]
            assert len(made) == 2
            assert {(a.status_code, a.json()["error"]["code"]) for a in refused} == {
                (402, "key_budget_exceeded")
            }
            assert (await gw.key(key_id))["budget"]["spent"] == "100.0000"

            task_id = made[0].json()["task_id"]
            canceled = await gw.clients[-1].post(f"/v1/tasks/{task_id}/cancel", headers=auth(key))
            assert canceled.status_code == 200 and canceled.json()["status"] == "canceled"
            assert (await gw.key(key_id))["budget"]["spent"] == "50.0000"

            again = await asyncio.gather(*(create(i) for i in range(10)))
            assert sorted(a.status_code for a in again) == [202] + [402] * 9
            ledger = await gw.ledger_of(key_id)
            assert -sum(e["amount_units"] for e in ledger) == parse_credits("100")
            assert sorted(e["kind"] for e in ledger) == ["debit", "debit", "debit", "refund"]

    asyncio.run(scenario())
