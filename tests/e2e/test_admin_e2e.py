"""The admin API on real `gateway serve` processes: two replicas sharing one real Redis (a
revocation reaches both within the key cache bound; grants show in the tenant's wallet and
ledger; usage names the model), and the token guard, including a gateway with no token."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from gateway.admin.token import hash_setting, new_admin_token
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.redis_replicated import ReplicatedRedis
from tests.support.routing_files import SIMULATOR_CONFIG
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until

TOKEN = new_admin_token()
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
KEY_CACHE_SECONDS = 1.0
"""How long a replica on Redis trusts a key it looked up (GATEWAY_KEY_CACHE_SECONDS' default
there, docs/api.md): the documented bound on a revocation reaching every replica."""


@pytest.fixture(scope="module")
def replicas(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    shared = redis_url.rsplit("/", 1)[0] + "/9"
    redis.Redis.from_url(shared).flushdb()
    env = {"GATEWAY_ADMIN_TOKEN_HASH": hash_setting(TOKEN), "GATEWAY_ADMIN_TOKEN": ""}
    workdir = tmp_path_factory.mktemp("admin")
    first = start_gateway(workdir / "a", SIMULATOR_CONFIG, store_url=shared, extra_env=env)
    try:
        second = start_gateway(workdir / "b", SIMULATOR_CONFIG, store_url=shared, extra_env=env)
    except BaseException:
        first.stop()
        raise
    yield first, second
    first.stop()
    second.stop()


def _admin_url(gateway: GatewayProcess, path: str) -> str:
    return gateway.base_url.removesuffix("/v1") + "/admin/v1" + path


def _admin_post(gateway: GatewayProcess, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(_admin_url(gateway, path), json=body, headers=ADMIN, timeout=10)


def _admin_get(gateway: GatewayProcess, path: str, **params: str) -> httpx.Response:
    return httpx.get(_admin_url(gateway, path), params=params, headers=ADMIN, timeout=10)


def _as(gateway: GatewayProcess, key: str, path: str) -> httpx.Response:
    return httpx.get(
        f"{gateway.base_url}{path}", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )


def test_a_key_revoked_on_one_replica_is_refused_by_both_within_the_cache_bound(
    replicas: tuple[GatewayProcess, GatewayProcess],
) -> None:
    a, b = replicas
    created = _admin_post(a, "/keys", {"tenant": "default"})
    assert created.status_code == 201, created.text
    key, key_id = created.json()["key"], created.json()["id"]
    # Both replicas know it (and B has it in its cache when it is revoked).
    assert _as(b, key, "/models").status_code == 200
    assert _as(a, key, "/models").status_code == 200
    listed = _admin_get(b, "/keys", prefix=key[:10]).json()["data"]
    assert [k["id"] for k in listed] == [key_id]

    revoked = _admin_post(a, f"/keys/{key_id}/revoke", {})
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert _as(a, key, "/models").status_code == 401  # the replica that revoked: at once
    wait_until(  # the other: within its key cache's bound
        lambda: _as(b, key, "/models").status_code == 401,
        timeout=KEY_CACHE_SECONDS + 0.5,
        what="the other replica to refuse the revoked key",
    )
    for gateway in (a, b, b, a):
        refused = _as(gateway, key, "/models")
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"
    again = _admin_post(b, f"/keys/{key_id}/revoke", {})
    assert again.status_code == 200, again.text
    # Revoking again keeps the first revocation. The last use may be later: B served the key,
    # within its cache bound, after A revoked it. It is one fact both replicas answer.
    unused = {"last_used_at": None}
    assert again.json() | unused == revoked.json() | unused
    assert _admin_get(a, f"/keys/{key_id}").json() == again.json()
    last_use = [datetime.fromisoformat(r.json()["last_used_at"]) for r in (revoked, again)]
    assert last_use[0] <= last_use[1]


def test_grants_through_the_api_show_in_the_wallet_the_ledger_and_usage(
    replicas: tuple[GatewayProcess, GatewayProcess],
) -> None:
    a, b = replicas
    key = a.new_key("poor")
    grant = {"amount": "25.5", "reason": "invoice 42", "id": "inv-42"}
    first = _admin_post(a, "/tenants/poor/grants", grant)
    assert first.status_code == 201, first.text
    retried = _admin_post(b, "/tenants/poor/grants", grant)  # a retry on the other replica
    assert retried.status_code == 200 and retried.json() == first.json()
    reused = _admin_post(b, "/tenants/poor/grants", grant | {"amount": "30"})
    assert reused.status_code == 409 and reused.json()["error"]["code"] == "entry_id_reused"
    fix = _admin_post(
        b, "/tenants/poor/adjustments", {"amount": "-0.5", "reason": "fix", "id": "fix-1"}
    )
    assert fix.status_code == 201, fix.text

    wallet = _as(a, key, "/wallet").json()
    assert wallet["balance_credits"] == "25.0000"
    ledger = _as(b, key, "/wallet/ledger").json()["data"]
    assert [(e["id"], e["kind"], e["amount_credits"], e["reason"]) for e in ledger] == [
        (fix.json()["id"], "adjustment", "-0.5000", "fix"),
        ("inv-42", "grant", "25.5000", "invoice 42"),
    ]
    assert _admin_get(a, "/tenants/poor/ledger").json()["data"] == ledger
    assert _admin_get(b, "/tenants/poor").json()["balance"] == "25.0000"

    chat = httpx.post(
        f"{a.base_url}/chat/completions",
        json={"model": "sim-chat-1", "messages": [{"role": "user", "content": "Hello"}]},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert chat.status_code == 200, chat.text
    spent = Decimal(chat.json()["usage"]["credits"])
    [row] = _admin_get(b, "/usage", tenant="poor").json()["data"]
    assert (row["model"], row["requests"], row["tasks"]) == ("sim-chat-1", 1, 0)
    assert Decimal(row["spend"]) == spent > 0


def test_tenant_keys_and_wrong_tokens_never_reach_the_admin_api(
    replicas: tuple[GatewayProcess, GatewayProcess],
) -> None:
    a, b = replicas
    key = a.new_key("default")
    assert _as(a, key, "/models").status_code == 200
    for gateway in (a, b):
        for headers in (
            {"Authorization": f"Bearer {key}"},
            {"Authorization": f"Bearer {new_admin_token()}"},
            {},
        ):
            response = httpx.get(_admin_url(gateway, "/tenants"), headers=headers, timeout=10)
            assert response.status_code == 401, response.text
            assert response.json()["error"]["code"] == "invalid_admin_token"
        assert _admin_get(gateway, "/tenants").status_code == 200
        # Nor is the admin token a tenant key.
        assert _as(gateway, TOKEN, "/models").status_code == 401
    routing = _admin_get(b, "/routing").json()
    assert routing["config_version"] == httpx.get(f"{b.base_url}/health").json()["config_version"]
    assert {x["provider"] for x in routing["breakers"]} == {"sim", "sim_slow"}


def test_without_an_admin_token_the_admin_api_is_disabled(tmp_path: Path) -> None:
    gateway = start_gateway(
        tmp_path,
        SIMULATOR_CONFIG,
        extra_env={"GATEWAY_ADMIN_TOKEN_HASH": "", "GATEWAY_ADMIN_TOKEN": ""},
    )
    try:
        assert gateway.api_key
        for headers in ({}, ADMIN, {"Authorization": f"Bearer {gateway.api_key}"}):
            for response in (
                httpx.get(_admin_url(gateway, "/tenants"), headers=headers, timeout=10),
                httpx.post(
                    _admin_url(gateway, "/keys"),
                    json={"tenant": "default"},
                    headers=headers,
                    timeout=10,
                ),
            ):
                assert response.status_code == 403, response.text
                assert response.json()["error"]["code"] == "admin_disabled"
        assert _as(gateway, gateway.api_key, "/models").status_code == 200
    finally:
        gateway.stop()


@STORE_FAULTS
def test_an_unconfirmed_grant_is_an_unknown_outcome_and_its_retry_applies_once(
    redis_binary: str, tmp_path: Path
) -> None:
    """A Redis primary whose replica stops acknowledging (paused while the primary still counts
    it): the grant stands, its answer is 504 `outcome_unknown` naming the id, never a retryable
    503; the retry with that id answers the entry, applied once."""
    env = {"GATEWAY_ADMIN_TOKEN_HASH": hash_setting(TOKEN), "GATEWAY_ADMIN_TOKEN": ""}
    with ReplicatedRedis.running(redis_binary, tmp_path / "redis") as pair:
        gateway = start_gateway(tmp_path, SIMULATOR_CONFIG, store_url=pair.url(), extra_env=env)
        try:
            _an_unconfirmed_grant_applies_once(gateway, pair)
        finally:
            gateway.stop()


def _an_unconfirmed_grant_applies_once(gateway: GatewayProcess, pair: ReplicatedRedis) -> None:
    grant = {"amount": "25", "reason": "invoice 43"}
    unnamed = _admin_post(gateway, "/tenants/poor/grants", grant)
    assert unnamed.status_code == 422, unnamed.text
    assert unnamed.json()["error"]["details"][0]["field"] == "id"
    url = _admin_url(gateway, "/tenants/poor/grants")
    headers = ADMIN | {"Idempotency-Key": "inv-43"}
    pair.stall_replica()
    first = httpx.post(url, json=grant, headers=headers, timeout=10)
    pair.resume_replica()
    assert first.status_code == 504, first.text
    error = first.json()["error"]
    assert (error["code"], error["retryable"]) == ("outcome_unknown", False)
    assert first.headers["x-should-retry"] == "false"
    assert error["details"] == [
        {"field": "id", "message": "retry with the same id 'inv-43': it applies at most once"}
    ]
    retried = httpx.post(url, json=grant, headers=headers, timeout=10)
    assert retried.status_code == 200, retried.text
    assert (retried.json()["id"], retried.json()["balance_after"]) == ("inv-43", "25.0000")
    assert _admin_get(gateway, "/tenants/poor").json()["balance"] == "25.0000"
