"""`POST /v1/embeddings` on the embedded default's routing file (the simulator's `sim-embed-1`),
through the official openai SDK against a running gateway: single and batch inputs,
`dimensions`, base64 that decodes to the float answer's values, the charge in `usage.credits`
equal to the ledger's, an Idempotency-Key replay that charges once, the rate limits, an
invalid body naming the field, and a model that is not an embeddings model."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.metrics_scrape import scrape, total

ROOT = Path(__file__).resolve().parents[2]
MODEL = "sim-embed-1"
# sim-embed-1 in the embedded default: 0.10 USD per million input tokens, markup 1200, so
# 1.2 units (0.00012 credits) per token.
UNITS_PER_TOKEN = Decimal("1.2")
TENANTS = """
[tenants.poor]
models = ["*"]

[tenants.replay]
models = ["*"]

[tenants.broke]
models = ["*"]

[tenants.tight]
models = ["*"]
tokens_per_minute = 40

[tenants.slow]
models = ["*"]
requests_per_minute = 1

[tenants.chatonly]
models = ["sim-chat-1"]
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    default = (ROOT / "gateway" / "config" / "default.toml").read_text()
    process = start_gateway(tmp_path_factory.mktemp("embed"), default + TENANTS)
    yield process
    process.stop()


@pytest.fixture
def sdk(gateway: GatewayProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


def _auth(key: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **extra}


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(v * v for v in vector))


def _as_float32(vector: list[float]) -> list[float]:
    return list(struct.unpack(f"<{len(vector)}f", struct.pack(f"<{len(vector)}f", *vector)))


def _ledger(gateway: GatewayProcess, key: str) -> list[dict[str, object]]:
    page = httpx.get(
        f"{gateway.base_url}/wallet/ledger", params={"limit": "100"}, headers=_auth(key)
    ).json()
    return page["data"]  # type: ignore[no-any-return]


def _balance(gateway: GatewayProcess, key: str) -> Decimal:
    return Decimal(
        httpx.get(f"{gateway.base_url}/wallet", headers=_auth(key)).json()["balance_credits"]
    )


def test_single_batch_and_dimensions_through_the_sdk(sdk: openai.OpenAI) -> None:
    single = sdk.embeddings.create(model=MODEL, input="The food was delicious.")
    again = sdk.embeddings.create(model="auto", input="The food was delicious.")
    batch = sdk.embeddings.create(model=MODEL, input=["The food was delicious.", "Tea?"])
    short = sdk.embeddings.create(model=MODEL, input="The food was delicious.", dimensions=64)
    vector = single.data[0].embedding
    assert single.object == "list" and single.model == MODEL
    assert len(vector) == 256 and _norm(vector) == pytest.approx(1.0, abs=1e-6)
    assert again.data[0].embedding == vector  # same input and model, same vector
    assert [item.index for item in batch.data] == [0, 1]
    assert batch.data[0].embedding == vector
    assert batch.data[1].embedding != vector
    cut = short.data[0].embedding
    assert len(cut) == 64 and _norm(cut) == pytest.approx(1.0, abs=1e-6)
    scale = _norm(vector[:64])
    assert cut == pytest.approx([v / scale for v in vector[:64]], abs=1e-6)
    assert single.usage.prompt_tokens == 6  # 23 bytes, 4 per token rounded up
    assert batch.usage.prompt_tokens == 6 + 1


def test_base64_decodes_to_the_float_answers_values(gateway: GatewayProcess) -> None:
    text = "Base64 or floats, one vector."
    answers = {}
    for encoding in ("float", "base64"):
        response = httpx.post(
            f"{gateway.base_url}/embeddings",
            json={"model": MODEL, "input": [text, "second"], "encoding_format": encoding},
            headers=_auth(gateway.api_key or ""),
        )
        assert response.status_code == 200, response.text
        answers[encoding] = [item["embedding"] for item in response.json()["data"]]
    decoded = []
    for encoded in answers["base64"]:
        raw = base64.b64decode(encoded)
        decoded.append(list(struct.unpack(f"<{len(raw) // 4}f", raw)))
    assert decoded == [_as_float32(vector) for vector in answers["float"]]
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as sdk:
        # The SDK asks for base64 when no format is given, and decodes it itself.
        through_sdk = sdk.embeddings.create(model=MODEL, input=[text, "second"])
    assert [item.embedding for item in through_sdk.data] == decoded


def test_the_charge_is_usage_credits_and_the_ledgers(gateway: GatewayProcess) -> None:
    key = gateway.new_key("poor")
    gateway.grant("poor", "5")
    before = _balance(gateway, key)
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as sdk:
        answer = sdk.embeddings.create(model=MODEL, input=["x" * 400, "y" * 41], dimensions=8)
    tokens = answer.usage.prompt_tokens
    assert tokens == 100 + 11
    expected = (tokens * UNITS_PER_TOKEN).quantize(Decimal(1)) / 10_000
    credits = Decimal((answer.usage.model_extra or {})["credits"])
    assert credits == expected > 0
    assert before - _balance(gateway, key) == credits
    entry = _ledger(gateway, key)[0]
    assert entry["kind"] == "charge"
    assert Decimal(str(entry["amount_credits"])) == -credits
    assert "embeddings sim-embed-1" in str(entry["reason"])


def test_an_idempotency_key_replays_and_charges_once(gateway: GatewayProcess) -> None:
    key = gateway.new_key("replay")
    gateway.grant("replay", "5")
    body = {"model": MODEL, "input": ["replay me", "and me"]}
    headers = _auth(key, **{"Idempotency-Key": "embed-once-1"})
    url = f"{gateway.base_url}/embeddings"
    first = httpx.post(url, json=body, headers=headers)
    entries = len(_ledger(gateway, key))
    balance = _balance(gateway, key)
    second = httpx.post(url, json=body, headers=headers)
    assert first.status_code == second.status_code == 200
    assert second.headers["idempotent-replayed"] == "true"
    assert second.content == first.content
    assert second.headers["x-gateway-model"] == MODEL
    assert len(_ledger(gateway, key)) == entries
    assert _balance(gateway, key) == balance
    other = httpx.post(url, json={**body, "input": "something else"}, headers=headers)
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"


def test_tokens_per_minute_refuses_past_the_limit(gateway: GatewayProcess) -> None:
    key = gateway.new_key("tight")
    gateway.grant("tight", "5")
    url = f"{gateway.base_url}/embeddings"
    body = {"model": MODEL, "input": "z" * 100}  # 25 tokens of the tenant's 40 a minute
    first = httpx.post(url, json=body, headers=_auth(key))
    assert first.status_code == 200, first.text
    assert first.headers["x-ratelimit-limit-tokens"] == "40"
    second = httpx.post(url, json=body, headers=_auth(key))
    assert second.status_code == 429
    assert second.json()["error"]["code"] == "rate_limited"
    assert int(second.headers["retry-after"]) >= 1


def test_requests_per_minute_refuses_the_second_call(gateway: GatewayProcess) -> None:
    key = gateway.new_key("slow")
    gateway.grant("slow", "5")
    url = f"{gateway.base_url}/embeddings"
    assert (
        httpx.post(url, json={"model": MODEL, "input": "a"}, headers=_auth(key)).status_code == 200
    )
    refused = httpx.post(url, json={"model": MODEL, "input": "a"}, headers=_auth(key))
    assert refused.status_code == 429
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": MODEL, "input": ["a", 3]}, "input[1]"),
        ({"model": MODEL, "input": [[1, 2], [-1]]}, "input[1]"),
        ({"model": MODEL, "input": []}, "input"),
        ({"model": MODEL, "input": "a", "dimensions": 0}, "dimensions"),
        ({"model": MODEL, "input": "a", "encoding_format": "int8"}, "encoding_format"),
        ({"model": MODEL, "input": "a", "colour": "red"}, "colour"),
        ({"model": MODEL}, "input"),
        ({"model": MODEL, "input": "a", "dimensions": 300}, "dimensions"),
    ],
)
def test_an_invalid_body_is_400_naming_the_field(
    gateway: GatewayProcess, body: dict[str, object], field: str
) -> None:
    response = httpx.post(
        f"{gateway.base_url}/embeddings", json=body, headers=_auth(gateway.api_key or "")
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert [d["field"] for d in error["details"]] == [field]


def test_a_model_without_the_capability_is_404(gateway: GatewayProcess) -> None:
    url = f"{gateway.base_url}/embeddings"
    chat_model = httpx.post(
        url, json={"model": "sim-chat-1", "input": "a"}, headers=_auth(gateway.api_key or "")
    )
    assert chat_model.status_code == 404
    assert chat_model.json()["error"]["code"] == "model_not_found"
    key = gateway.new_key("chatonly")
    not_allowed = httpx.post(url, json={"model": MODEL, "input": "a"}, headers=_auth(key))
    assert not_allowed.status_code == 404
    assert not_allowed.json()["error"]["code"] == "model_not_found"


def test_the_catalog_and_models_list_the_embeddings_model(sdk: openai.OpenAI) -> None:
    assert MODEL in [model.id for model in sdk.models.list()]
    capabilities = sdk.get("/catalog/capabilities", cast_to=httpx.Response).json()["data"]
    embeddings = next(c for c in capabilities if c["id"] == "embeddings")
    assert embeddings["release_label"] == "Available"
    assert embeddings["endpoints"] == ["/v1/embeddings"]
    assert embeddings["models"] == [MODEL]
    catalog = sdk.get("/catalog/models", cast_to=httpx.Response).json()["data"]
    entry = next(m for m in catalog if m["id"] == MODEL)
    assert entry["capabilities"] == ["embeddings"]
    assert entry["pricing"]["input"] == "0.10"


def test_metrics_label_the_endpoint_and_the_capability(gateway: GatewayProcess) -> None:
    key = gateway.api_key or ""
    response = httpx.post(
        f"{gateway.base_url}/embeddings",
        json={"model": MODEL, "input": "m" * 40},
        headers=_auth(key),
    )
    assert response.status_code == 200
    _, samples = scrape(gateway)
    assert total(samples, "gateway_requests_total", route="/v1/embeddings", status="200") >= 1
    assert total(samples, "gateway_requests_total", route="/v1/embeddings", model=MODEL) >= 1
    upstream = "gateway_upstream_request_seconds_count"
    assert total(samples, upstream, capability="embeddings", model=MODEL) >= 1
    charged = total(samples, "gateway_credits_charged_total", capability="embeddings", model=MODEL)
    assert charged > 0
    assert total(samples, "gateway_tokens_total", model=MODEL, direction="in") >= 10


def test_a_wallet_that_cannot_cover_the_hold_is_402_naming_input(gateway: GatewayProcess) -> None:
    key = gateway.new_key("broke")
    response = httpx.post(
        f"{gateway.base_url}/embeddings",
        json={"model": MODEL, "input": "a" * 1000},
        headers=_auth(key),
    )
    assert response.status_code == 402, response.text
    error = response.json()["error"]
    assert error["code"] == "insufficient_credits"
    # 1000 bytes bound 1000 tokens: 1,200 units at 1.2 per token.
    assert error["details"] == [
        {"field": "hold_credits", "message": "0.1200"},
        {"field": "available_credits", "message": "0.0000"},
        {"field": "input", "message": "send fewer or shorter inputs to hold less"},
    ]
    assert "max_completion_tokens" not in response.text
    assert _ledger(gateway, key) == []
