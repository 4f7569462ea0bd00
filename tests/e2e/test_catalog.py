"""Discovery: the catalog shows what /v1/models shows, with capabilities and prices."""

from __future__ import annotations

import httpx

from tests.support.gateway_process import GatewayProcess


def get(gateway: GatewayProcess, path: str) -> httpx.Response:
    return httpx.get(
        f"{gateway.base_url}{path}", headers={"Authorization": f"Bearer {gateway.api_key}"}
    )


def test_catalog_models_are_the_model_list_enriched(gateway: GatewayProcess) -> None:
    models = get(gateway, "/models").json()["data"]
    catalog = get(gateway, "/catalog/models").json()
    assert catalog["object"] == "list"
    assert [m["id"] for m in catalog["data"]] == [m["id"] for m in models]
    first = catalog["data"][0]
    assert first["capabilities"] == ["chat"]
    assert first["modalities"] == {"input": ["text"], "output": ["text"]}
    assert first["release_label"] == "Available"
    assert first["pricing"]["unit"] == "upstream_usd_per_million_tokens"


def test_capabilities_include_planned_ones(gateway: GatewayProcess) -> None:
    data = {c["id"]: c for c in get(gateway, "/catalog/capabilities").json()["data"]}
    assert data["chat"]["release_label"] == "Available"
    assert data["chat"]["endpoints"] == ["/v1/chat/completions"]
    assert "sim-chat-1" in data["chat"]["models"]
    assert data["video"]["release_label"] == "Planned"
    assert data["video"]["models"] == []
    assert "embeddings" not in data  # callable, and this routing file has no such model


def test_catalog_needs_a_key(gateway: GatewayProcess) -> None:
    response = httpx.get(f"{gateway.base_url}/catalog/models")
    assert response.status_code == 401
