"""A key's model list is checked against the model actually called, on every endpoint and
dialect, and the listings show only what the key may use."""

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


def test_a_key_reaches_only_its_models_whatever_the_endpoint(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, f"sqlite:///{tmp_path / 'g.db'}", 1) as gw:
            key, key_id = await gw.new_key(models=["sim-chat-1"])
            everything, _ = await gw.new_key()
            client, headers = gw.clients[0], auth(key)

            def not_found(answer: Any) -> None:
                assert answer.status_code == 404, answer.text
                error = answer.json().get("error", {})
                assert error.get("code", error.get("type")) in (
                    "model_not_found",
                    "not_found_error",
                )

            # Chat, pinned: only sim-chat-1; a query parameter names no model.
            ok = await client.post("/v1/chat/completions", json=chat(), headers=headers)
            assert ok.status_code == 200 and ok.json()["model"] == "sim-chat-1"
            pro = chat("sim-chat-pro")
            refused = await client.post("/v1/chat/completions", json=pro, headers=headers)
            not_found(refused)
            assert refused.json()["error"]["code"] == "model_not_found"
            sneaky = await client.post(
                "/v1/chat/completions?model=sim-chat-pro", json=pro, headers=headers
            )
            assert sneaky.status_code == 404
            behind = await client.post(
                "/v1/chat/completions?model=sim-chat-pro",
                json=chat(),
                headers={**headers, "x-model": "sim-chat-pro"},
            )
            assert behind.status_code == 200 and behind.json()["model"] == "sim-chat-1"
            # `auto` resolves (and would fall back) only among the key's models.
            for _ in range(5):
                auto = await client.post("/v1/chat/completions", json=chat("auto"), headers=headers)
                assert auto.status_code == 200 and auto.json()["model"] == "sim-chat-1"

            # Messages and Responses dialects.
            messages = {
                "model": "sim-chat-pro",
                "max_tokens": 16,
                "messages": [{"role": "user", "content": "hi"}],
            }
            answer = await client.post("/v1/messages", json=messages, headers={"x-api-key": key})
            not_found(answer)
            messages["model"] = "sim-chat-1"
            answer = await client.post("/v1/messages", json=messages, headers={"x-api-key": key})
            assert answer.status_code == 200, answer.text
            responses = {"model": "sim-chat-pro", "input": "hi", "max_output_tokens": 16}
            not_found(await client.post("/v1/responses", json=responses, headers=headers))

            # Embeddings and the model's own page.
            embed = {"model": "sim-embed-1", "input": "hello"}
            not_found(await client.post("/v1/embeddings", json=embed, headers=headers))
            not_found(await client.get("/v1/models/sim-chat-pro", headers=headers))
            assert (await client.get("/v1/models/sim-chat-1", headers=headers)).status_code == 200

            # Task creates: 422 naming `model`.
            image = {"model": "image-model-2", "prompt": "a fox"}
            task = await client.post("/v1/images/generations", json=image, headers=headers)
            assert task.status_code == 422, task.text
            assert "model" in {d["field"] for d in task.json()["error"]["details"]}

            # The listings.
            listed = await client.get("/v1/models", headers=headers)
            assert [m["id"] for m in listed.json()["data"]] == ["sim-chat-1"]
            catalog = await client.get("/v1/catalog/models", headers=headers)
            assert [m["id"] for m in catalog.json()["data"]] == ["sim-chat-1"]
            wide = await client.get("/v1/models", headers=auth(everything))
            assert len(wide.json()["data"]) > 1

            # The key's list is changed by a PATCH, at once on this replica.
            patched = await client.patch(
                f"/admin/v1/keys/{key_id}", json={"models": ["*"]}, headers=gw.admin
            )
            assert patched.status_code == 200 and patched.json()["models"] == ["*"]
            wider = await client.post("/v1/chat/completions", json=pro, headers=headers)
            assert wider.status_code == 200 and wider.json()["model"] == "sim-chat-pro"

    asyncio.run(scenario())
