"""/admin/v1 in process: the token guard, and every endpoint with its errors, on the app
factory over the embedded store (the end-to-end tests run it on Redis replicas)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.admin.token import hash_admin_token, new_admin_token
from tests.api.support import InProcessApp, in_process_app

Scenario = Callable[[InProcessApp], Awaitable[None]]

# As in test_app.py: Litestar 2.25 deprecation warnings the subprocess tests never see.
pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

TOKEN = new_admin_token()
ADMIN = {"Authorization": f"Bearer {TOKEN}"}

ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/admin/v1/tenants", None),
    ("GET", "/admin/v1/tenants/default", None),
    ("GET", "/admin/v1/keys", None),
    ("POST", "/admin/v1/keys", {"tenant": "default"}),
    ("POST", "/admin/v1/keys/key_x/revoke", None),
    ("POST", "/admin/v1/tenants/default/grants", {"amount": "1", "reason": "x", "id": "g"}),
    ("POST", "/admin/v1/tenants/default/adjustments", {"amount": "-1", "reason": "x", "id": "a"}),
    ("GET", "/admin/v1/tenants/default/ledger", None),
    ("GET", "/admin/v1/usage", None),
    ("GET", "/admin/v1/tasks", None),
    ("GET", "/admin/v1/routing", None),
    ("POST", "/admin/v1/tenants/default/callback-secret", None),
    ("POST", "/admin/v1/tasks/task_x/callback/redeliver", None),
    ("GET", "/admin/v1/callbacks/failed", None),
]


def _run(tmp_path: Path, scenario: Scenario, *, token: bool = True) -> None:
    async def main() -> None:
        overrides = {"admin_token_hash": hash_admin_token(TOKEN)} if token else {}
        async with in_process_app(tmp_path, **overrides) as gateway:
            await scenario(gateway)

    asyncio.run(main())


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    assert error["request_id"] == response.headers["x-request-id"]
    return error


async def _call(
    gw: InProcessApp, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]
) -> httpx.Response:
    if method == "GET":
        return await gw.client.get(path, headers=headers)
    return await gw.client.post(path, json=body, headers=headers)


async def _post(
    gw: InProcessApp, path: str, body: dict[str, Any], *, headers: dict[str, str] | None = None
) -> httpx.Response:
    return await gw.client.post(f"/admin/v1{path}", json=body, headers=ADMIN | (headers or {}))


async def _get(gw: InProcessApp, path: str, **params: str) -> httpx.Response:
    return await gw.client.get(f"/admin/v1{path}", params=params, headers=ADMIN)


# The guard --------------------------------------------------------------------------------


def test_without_an_admin_token_every_route_is_disabled(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        for method, path, body in ROUTES:
            for headers in ({}, ADMIN, gw.auth()):
                response = await _call(gw, method, path, body, headers)
                error = _error(response, 403, "admin_disabled")
                assert "GATEWAY_ADMIN_TOKEN_HASH" in error["message"]
                assert "gateway admin token" in error["message"]

    _run(tmp_path, scenario, token=False)


def test_a_missing_or_wrong_token_and_tenant_keys_are_refused(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        wrong = [
            {},
            gw.auth(),  # a tenant key
            gw.auth(gw.keys["limited"]),
            {"Authorization": f"Bearer {new_admin_token()}"},
            {"Authorization": f"Bearer {TOKEN}x"},
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": "Bearer "},
            {"Authorization": TOKEN},
        ]
        for method, path, body in ROUTES:
            for headers in wrong:
                response = await _call(gw, method, path, body, headers)
                _error(response, 401, "invalid_admin_token")
                assert response.headers["www-authenticate"] == "Bearer"
        # Two Authorization headers, one of them right, are refused too.
        both = [("authorization", f"Bearer {TOKEN}"), ("authorization", "Bearer x")]
        _error(await gw.client.get("/admin/v1/tenants", headers=both), 401, "invalid_admin_token")
        # The admin token is not a tenant key either.
        _error(await gw.client.get("/v1/models", headers=ADMIN), 401, "invalid_api_key")
        assert (await gw.client.get("/admin/v1/tenants", headers=ADMIN)).status_code == 200

    _run(tmp_path, scenario)


# Tenants and keys ---------------------------------------------------------------------------


def test_tenants_are_the_routing_files_with_wallets_and_key_counts(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        response = await _get(gw, "/tenants")
        assert response.status_code == 200, response.text
        listed = response.json()
        assert listed["object"] == "list"
        by_id = {t["id"]: t for t in listed["data"]}
        assert sorted(by_id) == sorted(gw.config.tenants)
        assert by_id["default"] == {
            "id": "default",
            "models": ["*"],
            "requests_per_minute": 600,
            "tokens_per_minute": 1_000_000,
            "balance": "1000.0000",
            "held": "0.0000",
            "keys": {"active": 1, "revoked": 0},
        }
        assert by_id["limited"]["requests_per_minute"] == 1
        assert by_id["limited"]["balance"] == "10000.0000"
        one = await _get(gw, "/tenants/limited")
        assert one.status_code == 200 and one.json() == by_id["limited"]
        error = _error(await _get(gw, "/tenants/ghost"), 404, "tenant_not_found")
        assert "'ghost'" in error["message"] and "default" in error["message"]

    _run(tmp_path, scenario)


def test_keys_are_created_listed_by_tenant_or_prefix_and_revoked(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        created = await _post(gw, "/keys", {"tenant": "default"})
        assert created.status_code == 201, created.text
        body = created.json()
        key = body.pop("key")
        assert key.startswith("gw-") and body["prefix"] == key[:10]
        assert body["id"].startswith("key_") and body["tenant"] == "default"
        assert body["revoked_at"] is None and body["created_at"].endswith("Z")
        assert (await gw.client.get("/v1/models", headers=gw.auth(key))).status_code == 200

        everyone = (await _get(gw, "/keys")).json()
        assert everyone["object"] == "list"
        assert {k["tenant"] for k in everyone["data"]} == {"default", "limited"}
        assert all("key" not in k for k in everyone["data"])  # the secret is shown once
        mine = (await _get(gw, "/keys", tenant="default")).json()["data"]
        used = {**body, "last_used_at": mine[-1]["last_used_at"]}  # the /v1/models call
        assert used in mine and len(mine) == 2 and used["last_used_at"] is not None
        assert (await _get(gw, "/keys", prefix=key[:10])).json()["data"] == [used]
        assert (await _get(gw, "/keys", prefix=body["id"])).json()["data"] == [used]
        assert (await _get(gw, "/keys", tenant="limited", prefix=key[:10])).json()["data"] == []
        _error(await _get(gw, "/keys", tenant="ghost"), 404, "tenant_not_found")

        revoked = await _post(gw, f"/keys/{body['id']}/revoke", {})
        assert revoked.status_code == 200, revoked.text
        first = revoked.json()
        assert first["revoked_at"] is not None and first["id"] == body["id"]
        refused = await gw.client.get("/v1/models", headers=gw.auth(key))
        _error(refused, 401, "invalid_api_key")
        again = await _post(gw, f"/keys/{body['id']}/revoke", {})
        assert again.status_code == 200 and again.json() == first
        counts = (await _get(gw, "/tenants/default")).json()["keys"]
        assert counts == {"active": 1, "revoked": 1}

        _error(await _post(gw, "/keys/key_nope/revoke", {}), 404, "key_not_found")
        _error(await _post(gw, f"/keys/{gw.key}/revoke", {}), 404, "key_not_found")
        assert (await gw.client.get("/v1/models", headers=gw.auth())).status_code == 200

    _run(tmp_path, scenario)


def test_key_creation_refuses_bad_bodies(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        _error(await _post(gw, "/keys", {"tenant": "ghost"}), 404, "tenant_not_found")
        error = _error(await _post(gw, "/keys", {}), 422, "validation_error")
        assert error["details"][0]["field"] == "tenant"
        _error(await _post(gw, "/keys", {"tenant": "default", "x": 1}), 422, "validation_error")
        not_json = await gw.client.post(
            "/admin/v1/keys",
            content=b"tenant=default",
            headers=ADMIN | {"content-type": "text/plain"},
        )
        _error(not_json, 415, "unsupported_media_type")
        broken = await gw.client.post(
            "/admin/v1/keys", content=b"{", headers=ADMIN | {"content-type": "application/json"}
        )
        _error(broken, 422, "validation_error")

    _run(tmp_path, scenario)


# Credits ------------------------------------------------------------------------------------


def test_grants_and_adjustments_happen_once_per_id(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        grant = {"amount": "25.5", "reason": "invoice 7", "id": "invoice-7"}
        first = await _post(gw, "/tenants/default/grants", grant)
        assert first.status_code == 201, first.text
        entry = first.json()
        assert entry == {
            "id": "invoice-7",
            "tenant": "default",
            "kind": "grant",
            "amount": "25.5000",
            "balance_after": "1025.5000",
            "reason": "invoice 7",
            "created_at": entry["created_at"],
        }
        retry = await _post(gw, "/tenants/default/grants", grant)
        assert retry.status_code == 200 and retry.json() == entry
        other = await _post(gw, "/tenants/default/grants", grant | {"amount": "26"})
        error = _error(other, 409, "entry_id_reused")
        assert "25.5000" in error["message"] and error["details"][0]["field"] == "id"
        as_adjustment = await _post(gw, "/tenants/default/adjustments", grant)
        _error(as_adjustment, 409, "entry_id_reused")

        adjusted = await _post(
            gw,
            "/tenants/default/adjustments",
            {"amount": "-3", "reason": "fix"},
            headers={"Idempotency-Key": "ticket-3"},
        )
        assert adjusted.status_code == 201, adjusted.text
        fix = adjusted.json()
        assert (fix["kind"], fix["amount"], fix["balance_after"]) == (
            "adjustment",
            "-3.0000",
            "1022.5000",
        )
        assert fix["id"] == "ticket-3"
        unnamed = await _post(gw, "/tenants/default/grants", {"amount": "1", "reason": "r"})
        error = _error(unnamed, 422, "validation_error")
        assert error["details"][0]["field"] == "id" and "required" in error["message"]
        both = {"amount": "1", "reason": "r", "id": "a"}
        differ = await _post(gw, "/tenants/default/grants", both, headers={"Idempotency-Key": "b"})
        assert _error(differ, 422, "validation_error")["details"][0]["field"] == "id"
        unnamed = await _post(gw, "/tenants/default/grants", both, headers={"Idempotency-Key": "a"})
        assert unnamed.status_code == 201 and unnamed.json()["id"] == "a"

        wallet = (await gw.client.get("/v1/wallet", headers=gw.auth())).json()
        assert wallet["balance_credits"] == "1023.5000"
        mine = (await gw.client.get("/v1/wallet/ledger", headers=gw.auth())).json()
        admin = await _get(gw, "/tenants/default/ledger")
        assert admin.status_code == 200 and admin.json() == mine
        assert [e["id"] for e in mine["data"][:3]] == [
            unnamed.json()["id"],
            fix["id"],
            "invoice-7",
        ]
        paged = (await _get(gw, "/tenants/default/ledger", limit="1", after="invoice-7")).json()
        assert paged["data"][0]["kind"] == "grant" and paged["has_more"] is False
        _error(await _get(gw, "/tenants/default/ledger", limit="0"), 422, "validation_error")
        _error(await _get(gw, "/tenants/ghost/ledger"), 404, "tenant_not_found")

    _run(tmp_path, scenario)


def test_entries_that_break_the_rules_are_refused(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("grants", {"amount": "-1", "reason": "x"}, "amount"),
            ("grants", {"amount": "0", "reason": "x"}, "amount"),
            ("adjustments", {"amount": "0.0000", "reason": "x"}, "amount"),
            ("grants", {"amount": "abc", "reason": "x"}, "amount"),
            ("grants", {"amount": "1.23456", "reason": "x"}, "amount"),
            ("grants", {"amount": "NaN", "reason": "x"}, "amount"),
            ("grants", {"amount": 5, "reason": "x"}, "amount"),
            ("grants", {"amount": "1"}, "reason"),
            ("grants", {"amount": "1", "reason": "   "}, "reason"),
            ("grants", {"amount": "1", "reason": "x", "id": "charge:call_1"}, "id"),
            ("grants", {"amount": "1", "reason": "x", "id": ""}, "id"),
            ("grants", {"amount": "1", "reason": "x", "id": "x" * 201}, "id"),
            ("grants", {"amount": "1", "reason": "x"}, "id"),
            ("adjustments", {"amount": "1", "reason": "x"}, "id"),
        ]
        for path, body, field in cases:
            response = await _post(gw, f"/tenants/default/{path}", body)
            error = _error(response, 422, "validation_error")
            assert error["details"][0]["field"] == field, (body, error)
        _error(
            await _post(gw, "/tenants/ghost/grants", {"amount": "1", "reason": "x"}),
            404,
            "tenant_not_found",
        )
        wallet = (await gw.client.get("/v1/wallet", headers=gw.auth())).json()
        assert wallet["balance_credits"] == "1000.0000"  # nothing moved

    _run(tmp_path, scenario)


# Usage, tasks, routing ----------------------------------------------------------------------


async def _image_task(gw: InProcessApp, key: str | None = None) -> dict[str, Any]:
    response = await gw.client.post(
        "/v1/images/generations",
        json={"model": "auto", "prompt": "a red fox"},
        headers=gw.auth(key),
    )
    assert response.status_code == 202, response.text
    task: dict[str, Any] = response.json()
    return task


def test_usage_counts_requests_tasks_and_spend_per_model_and_day(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        for _ in range(2):
            chat = await gw.client.post(
                "/v1/chat/completions",
                json={"model": "sim-chat-1", "messages": [{"role": "user", "content": "Hi"}]},
                headers=gw.auth(),
            )
            assert chat.status_code == 200, chat.text
        kept = await _image_task(gw)
        canceled = await _image_task(gw)
        cancel = await gw.client.post(f"/v1/tasks/{canceled['task_id']}/cancel", headers=gw.auth())
        assert cancel.json()["status"] == "canceled"
        ledger = (await gw.client.get("/v1/wallet/ledger", headers=gw.auth())).json()["data"]
        charges = [Decimal(e["amount_credits"]) for e in ledger if e["kind"] == "charge"]
        assert len(charges) == 2

        response = await _get(gw, "/usage")
        assert response.status_code == 200, response.text
        report = response.json()
        assert report["object"] == "usage"
        assert report["from"].endswith("Z") and report["to"].endswith("Z")
        day = ledger[0]["created_at"][:10]
        rows = {(r["tenant"], r["model"]): r for r in report["data"]}
        assert set(rows) == {("default", "sim-chat-1"), ("default", "image-model-2")}
        chat_row = rows[("default", "sim-chat-1")]
        assert (chat_row["day"], chat_row["requests"], chat_row["tasks"]) == (day, 2, 0)
        assert Decimal(chat_row["charged"]) == -sum(charges) == Decimal(chat_row["spend"])
        assert chat_row["refunded"] == "0.0000"
        assert rows[("default", "image-model-2")] == {
            "tenant": "default",
            "model": "image-model-2",
            "day": day,
            "requests": 0,
            "tasks": 2,
            "charged": "100.0000",
            "refunded": "50.0000",
            "spend": "50.0000",
        }
        assert kept["status"] == "queued"

        whole_day = (await _get(gw, "/usage", **{"from": day, "to": day})).json()
        assert whole_day["data"] == report["data"]
        assert whole_day["from"] == f"{day}T00:00:00Z"
        assert (await _get(gw, "/usage", tenant="limited")).json()["data"] == []
        past = (await _get(gw, "/usage", **{"from": "2020-01-01", "to": "2020-01-31"})).json()
        assert past["data"] == [] and past["to"] == "2020-02-01T00:00:00Z"
        iso = await _get(
            gw, "/usage", **{"from": f"{day}T00:00:00+00:00", "to": "2999-01-01T00:00:00Z"}
        )
        assert iso.json()["data"] == report["data"]

        backwards = await _get(gw, "/usage", **{"from": "2026-02-01", "to": "2026-01-01"})
        assert _error(backwards, 422, "validation_error")["details"][0]["field"] == "from"
        for bad in ({"from": "yesterday"}, {"to": "2026-13-01"}, {"to": "2026-01-01T25:00"}):
            _error(await _get(gw, "/usage", **bad), 422, "validation_error")
        _error(await _get(gw, "/usage", tenant="ghost"), 404, "tenant_not_found")

    _run(tmp_path, scenario)


def test_recent_tasks_of_every_tenant_newest_first(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        first = await _image_task(gw)
        second = await _image_task(gw, gw.keys["limited"])
        third = await _image_task(gw)
        await gw.client.post(f"/v1/tasks/{third['task_id']}/cancel", headers=gw.auth())

        listed = (await _get(gw, "/tasks")).json()
        assert listed["object"] == "list"
        ids = [t["id"] for t in listed["data"]]
        assert ids == [third["task_id"], second["task_id"], first["task_id"]]
        top = listed["data"][0]
        assert top == {
            "id": third["task_id"],
            "tenant": "default",
            "capability": "text_to_image",
            "model": "image-model-2",
            "status": "canceled",
            "progress": top["progress"],
            "created_at": top["created_at"],
            "finished_at": top["finished_at"],
            "cost": "0.0000",
        }
        assert top["finished_at"] is not None and isinstance(top["progress"], float)
        assert listed["data"][1]["tenant"] == "limited" and listed["data"][1]["cost"] == "50.0000"
        assert listed["data"][1]["finished_at"] is None

        limited = (await _get(gw, "/tasks", tenant="limited")).json()["data"]
        assert [t["id"] for t in limited] == [second["task_id"]]
        queued = (await _get(gw, "/tasks", status="queued")).json()["data"]
        assert [t["id"] for t in queued] == [second["task_id"], first["task_id"]]
        assert len((await _get(gw, "/tasks", limit="1")).json()["data"]) == 1
        for bad in ({"limit": "0"}, {"limit": "201"}, {"limit": "ten"}, {"status": "done"}):
            _error(await _get(gw, "/tasks", **bad), 422, "validation_error")
        _error(await _get(gw, "/tasks", tenant="ghost"), 404, "tenant_not_found")

    _run(tmp_path, scenario)


def test_routing_shows_models_auto_chains_breakers_and_the_version(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        response = await _get(gw, "/routing")
        assert response.status_code == 200, response.text
        table = response.json()
        assert table["config_version"] == gw.config.version and len(table["config_version"]) == 12
        models = {m["id"]: m for m in table["models"]}
        assert set(models) == set(gw.config.models)
        assert models["sim-chat-1"] == {
            "id": "sim-chat-1",
            "capabilities": ["chat"],
            "provider": "sim",
            "upstream_model": "sim-chat-1",
            "release_label": "Available",
        }
        assert models["image-model-2"]["capabilities"] == ["text_to_image", "image_to_image"]
        assert table["auto"]["chat"] == "sim-chat-1 -> sim-chat-pro"
        assert table["auto"]["text_to_image"] == "image-model-2"
        assert table["breakers"] == [{"provider": "sim", "state": "closed"}]

    _run(tmp_path, scenario)
