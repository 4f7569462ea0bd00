"""The admin API of keys: the fields and their checks, PATCH (null removes, a lowered budget
stops the key), rotation with a grace, and a key's own rate limit."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.keys.gateways import auth, chat, replicas

pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]


def _fields(answer: Any) -> set[str]:
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    return {d["field"] for d in error["details"]}


def test_fields_patch_rotate_and_rate_limits(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, f"sqlite:///{tmp_path / 'g.db'}", 1) as gw:
            client, admin = gw.clients[0], gw.admin
            bad = {
                "tenant": "default",
                "name": "",
                "models": ["nope"],
                "budget": {"credits": "1.23456", "period": "year"},
                "expires_at": "2020-01-01T00:00:00Z",
                "requests_per_minute": 10**6,
                "metadata": {f"k{i}": "v" for i in range(17)},
            }
            refused = await client.post("/admin/v1/keys", json=bad, headers=admin)
            assert _fields(refused) == {
                "name",
                "models",
                "budget.credits",
                "budget.period",
                "expires_at",
                "requests_per_minute",
                "metadata",
            }
            key, key_id = await gw.new_key(
                name="team",
                models=["sim-chat-1"],
                budget={"credits": "25", "period": "week"},
                expires_at="2099-01-01T00:00:00Z",
                requests_per_minute=100,
                metadata={"owner": "search"},
            )
            view = await gw.key(key_id)
            assert view["name"] == "team" and view["models"] == ["sim-chat-1"]
            assert view["budget"]["credits"] == "25.0000" and view["budget"]["period"] == "week"
            assert view["budget"]["remaining"] == "25.0000"
            assert view["expires_at"] == "2099-01-01T00:00:00Z"
            assert (view["requests_per_minute"], view["tokens_per_minute"]) == (100, None)
            assert view["metadata"] == {"owner": "search"}

            # A key's own requests per minute: the third is 429; another key goes on.
            limited, _ = await gw.new_key(requests_per_minute=2)
            answers = [
                await client.post("/v1/chat/completions", json=chat(), headers=auth(limited))
                for _ in range(3)
            ]
            assert [a.status_code for a in answers] == [200, 200, 429]
            assert answers[0].headers["x-ratelimit-limit-requests"] == "2"
            free = await client.post("/v1/chat/completions", json=chat(), headers=auth(key))
            assert free.status_code == 200 and free.headers["x-ratelimit-limit-requests"] == "100"

            # PATCH: a field left out stays, null removes; a budget below what was spent stops
            # the key (402) until raised again.
            path = f"/admin/v1/keys/{key_id}"
            patched = await client.patch(
                path, json={"requests_per_minute": None, "name": "renamed"}, headers=admin
            )
            assert patched.status_code == 200, patched.text
            after = patched.json()
            assert after["requests_per_minute"] is None and after["name"] == "renamed"
            assert after["models"] == ["sim-chat-1"] and after["budget"]["credits"] == "25.0000"
            low = await client.patch(
                path, json={"budget": {"credits": "0.0001", "period": "week"}}, headers=admin
            )
            assert low.json()["budget"]["remaining"] == "0.0000"
            stopped = await client.post("/v1/chat/completions", json=chat(), headers=auth(key))
            assert stopped.status_code == 402
            assert stopped.json()["error"]["code"] == "key_budget_exceeded"
            # Every dialect and endpoint answers the same refusal.
            tiny, _ = await gw.new_key(budget={"credits": "0.0001", "period": "day"})
            embed = {"model": "sim-embed-1", "input": "hello there"}
            refusals = [
                await client.post("/v1/embeddings", json=embed, headers=auth(tiny)),
                await client.post(
                    "/v1/responses",
                    json={"model": "sim-chat-1", "input": "hi", "max_output_tokens": 16},
                    headers=auth(tiny),
                ),
            ]
            for refusal in refusals:
                assert refusal.status_code == 402, refusal.text
                assert refusal.json()["error"]["code"] == "key_budget_exceeded"
            messages = {
                "model": "sim-chat-1",
                "max_tokens": 16,
                "messages": [{"role": "user", "content": "hi"}],
            }
            anthropic = await client.post(
                "/v1/messages", json=messages, headers={"x-api-key": tiny}
            )
            assert anthropic.status_code == 402, anthropic.text
            await client.patch(path, json={"budget": None}, headers=admin)
            going = await client.post("/v1/chat/completions", json=chat(), headers=auth(key))
            assert going.status_code == 200
            assert _fields(
                await client.patch(path, json={"expires_at": "2001-01-01T00:00:00Z"}, headers=admin)
            ) == {"expires_at"}
            unknown = await client.patch("/admin/v1/keys/key_nope", json={}, headers=admin)
            assert unknown.status_code == 404

            # Rotation: the same id, a new secret; the old works through the grace.
            rotated = await client.post(
                f"{path}/rotate", json={"grace_seconds": 3600}, headers=admin
            )
            assert rotated.status_code == 201, rotated.text
            new = rotated.json()
            assert new["id"] == key_id and new["key"] != key and new["name"] == "renamed"
            for secret in (key, new["key"]):
                ok = await client.post("/v1/chat/completions", json=chat(), headers=auth(secret))
                assert ok.status_code == 200
            at_once = await client.post(f"{path}/rotate", json={}, headers=admin)
            newest = at_once.json()["key"]
            gone = await client.get("/v1/models", headers=auth(new["key"]))
            assert gone.status_code == 401
            assert gone.json()["error"]["message"] == "the API key has expired"
            assert (await client.get("/v1/models", headers=auth(newest))).status_code == 200
            assert _fields(
                await client.post(f"{path}/rotate", json={"grace_seconds": -1}, headers=admin)
            ) == {"grace_seconds"}

    asyncio.run(scenario())
