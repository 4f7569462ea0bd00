"""The Responses API passed through to an OpenAI upstream (a fake `/v1/responses` over real HTTP)
and translated to an OpenAI-compatible server's chat completions, behind one gateway.

Passthrough: the upstream gets the body as the client sent it but for `model` (encrypted
reasoning, `include`, built-in tools, `store` kept); the answer and each
event come back as the upstream sent them but for `model` and the credits in the terminal
usage, charged from the upstream's counts. An upstream's own `response.failed` arrives once; an
upstream that breaks off ends in the gateway's `response.failed`. Translation: the same request
becomes a chat completion call, and what only passthrough can serve is a 400 naming it.
`previous_response_id` is the gateway's on both: a passthrough route is sent the earlier turns
from the gateway's store in `input` (never the field), whichever route answered them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.openai_responses_upstream import (
    DEFAULT_TEXT,
    FakeOpenAIResponses,
    ResponsesReply,
    ResponsesStreamReply,
    whole_response,
)
from tests.fakes.openai_upstream import FakeOpenAI
from tests.support.gateway_process import GatewayProcess, client_for, start_gateway
from tests.support.responses_events import check_event_order, read_events

CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.oai]
kind = "openai"
base_url = "{responses}"
api_key = "sk-upstream-secret"
timeout_seconds = 5

[providers.az]
kind = "azure_openai"
base_url = "{azure}"
api = "v1"
deployment = "my-deployment"
api_key = "az-upstream-secret"
timeout_seconds = 5

[providers.chat_only]
kind = "openai"
base_url = "{compat}"
api_key = "sk-chat-only"
responses_api = false
timeout_seconds = 5

[providers.compat]
kind = "openai_compatible"
base_url = "{compat}"
timeout_seconds = 5

[[models]]
id = "gpt-pass"
provider = "oai"
upstream_model = "gpt-5-upstream"
capability = "chat"
markup = 1000
max_output_tokens = 4096
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[[models]]
id = "az-pass"
provider = "az"
upstream_model = "gpt-5"
capability = "chat"
markup = 1000
max_output_tokens = 4096
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[[models]]
id = "chat-only"
provider = "chat_only"
upstream_model = "model-b"
capability = "chat"
markup = 1000
max_output_tokens = 4096
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[[models]]
id = "compat-chat"
provider = "compat"
upstream_model = "model-a"
capability = "chat"
markup = 1000
max_output_tokens = 4096
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[routing.auto]
chat = ["gpt-pass", "compat-chat"]

[tenants.default]
"""
CLIENT_BODY: dict[str, Any] = {
    "model": "gpt-pass",
    "instructions": "Be brief.",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Search rivers"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB-opaque"},
    ],
    "tools": [{"type": "web_search"}],
    "include": ["reasoning.encrypted_content"],
    "store": True,
    "a_field_this_gateway_does_not_know": {"kept": True},
}


@pytest.fixture(scope="module")
def responses_upstream() -> Iterator[FakeOpenAIResponses]:
    fake = FakeOpenAIResponses()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def compat() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    responses_upstream: FakeOpenAIResponses,
    compat: FakeOpenAI,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-responses-passthrough")
    config = CONFIG.format(
        responses=responses_upstream.base_url,
        azure=responses_upstream.base_url.removesuffix("/v1"),
        compat=compat.base_url,
    )
    process = start_gateway(workdir, config)
    yield process
    process.stop()


@pytest.fixture
def http(gateway: GatewayProcess) -> Iterator[httpx.Client]:
    assert gateway.api_key
    with client_for(gateway, gateway.api_key) as c:
        yield c


def last_charge(http: httpx.Client) -> Decimal:
    entries = http.get("/v1/wallet/ledger", params={"limit": 1}).json()["data"]
    assert entries[0]["kind"] == "charge"
    return -Decimal(entries[0]["amount_credits"])


def test_a_whole_response_passes_through(
    http: httpx.Client, responses_upstream: FakeOpenAIResponses
) -> None:
    answer = http.post("/v1/responses", json=CLIENT_BODY)
    assert answer.status_code == 200, answer.text
    assert "x-gateway-dropped-tools" not in answer.headers
    sent = responses_upstream.requests[-1]
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-upstream-secret"
    assert sent.json == {**CLIENT_BODY, "model": "gpt-5-upstream"}
    body = answer.json()
    expected = {**whole_response("gpt-5-upstream"), "model": "gpt-pass"}
    usage, expected_usage = body.pop("usage"), expected.pop("usage")
    assert body == expected
    assert {k: v for k, v in usage.items() if not k.startswith("credits")} == expected_usage
    # 10 input tokens at $5/M and 8 output at $15/M, 1000 credits per USD
    assert Decimal(usage["credits"]) == Decimal("0.17") == last_charge(http)
    assert body["id"] == "resp_fake0001"  # the upstream's: it keeps the state


def test_a_stream_passes_through_event_by_event(
    http: httpx.Client, responses_upstream: FakeOpenAIResponses
) -> None:
    with http.stream("POST", "/v1/responses", json={**CLIENT_BODY, "stream": True}) as answer:
        assert answer.status_code == 200
        assert "x-gateway-dropped-tools" not in answer.headers
        raw = answer.read().decode()
    sent = responses_upstream.requests[-1].json
    assert sent == {**CLIENT_BODY, "model": "gpt-5-upstream", "stream": True}
    events = read_events(raw)
    final = check_event_order(events)
    assert final["output"][0]["content"][0]["text"] == DEFAULT_TEXT
    kept = http.get(f"/v1/responses/{final['id']}")
    assert kept.status_code == 200 and kept.json() == final  # kept as the stream ended
    upstream = read_events(_upstream_stream_text())
    assert len(events) == len(upstream)
    for got, sent_event in zip(events, upstream, strict=True):
        if "response" in sent_event:
            sent_event["response"]["model"] = "gpt-pass"
        if sent_event["type"] == "response.completed":
            credits = got["response"]["usage"].pop("credits")
            got["response"]["usage"].pop("credits_usd_reference")
            assert Decimal(credits) == Decimal("0.17")
        assert got == sent_event


def _upstream_stream_text() -> str:
    """The stream the fake sends by default (what the gateway must pass on)."""
    from tests.fakes.openai_responses_upstream import _events_of, event_bytes

    return b"".join(event_bytes(e) for e in _events_of(whole_response("gpt-5-upstream"))).decode()


def test_an_upstreams_response_failed_arrives_once(
    http: httpx.Client, responses_upstream: FakeOpenAIResponses
) -> None:
    started = {**whole_response("gpt-5-upstream"), "status": "in_progress", "output": []}
    failed = {
        **started,
        "status": "failed",
        "error": {"code": "server_error", "message": "The model failed."},
        "usage": None,
    }
    responses_upstream.enqueue(
        ResponsesStreamReply(
            events=[
                {"type": "response.created", "response": started, "sequence_number": 0},
                {"type": "response.in_progress", "response": started, "sequence_number": 1},
                {"type": "response.failed", "response": failed, "sequence_number": 2},
            ]
        )
    )
    with http.stream("POST", "/v1/responses", json={**CLIENT_BODY, "stream": True}) as answer:
        events = read_events(answer.read().decode())
    final = check_event_order(events)
    assert [e["type"] for e in events][-1] == "response.failed"
    assert final["error"] == {"code": "server_error", "message": "The model failed."}


def test_an_upstream_that_breaks_off_ends_in_the_gateways_response_failed(
    http: httpx.Client, responses_upstream: FakeOpenAIResponses
) -> None:
    responses_upstream.enqueue(ResponsesStreamReply(break_after=6))
    with http.stream("POST", "/v1/responses", json={**CLIENT_BODY, "stream": True}) as answer:
        events = read_events(answer.read().decode())
    final = check_event_order(events)
    assert len(events) == 7 and events[-1]["type"] == "response.failed"
    assert final["error"]["code"] == "server_error"


def test_translated_to_an_openai_compatible_server(http: httpx.Client, compat: FakeOpenAI) -> None:
    body = {
        "model": "compat-chat",
        "instructions": "Be brief.",
        "input": CLIENT_BODY["input"],
        "tools": [{"type": "web_search"}],
    }
    answer = http.post("/v1/responses", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-gateway-dropped-tools"] == "web_search"
    assert answer.json()["output"][0]["content"][0]["text"] == compat.text
    sent = compat.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.json["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Search rivers"}]},
    ]
    assert "tools" not in sent.json and "gAAAAB" not in json.dumps(sent.json)
    refused = http.post("/v1/responses", json={**body, "previous_response_id": "resp_1"})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "previous_response_id"
    assert error["code"] == "previous_response_not_found"


def test_a_passthrough_turn_continues_from_the_gateways_store(
    http: httpx.Client, responses_upstream: FakeOpenAIResponses
) -> None:
    first = http.post("/v1/responses", json=CLIENT_BODY)
    assert first.status_code == 200, first.text
    kept = http.get(f"/v1/responses/{first.json()['id']}")
    assert kept.status_code == 200 and kept.json() == first.json()
    body = {"model": "gpt-pass", "input": "And then?", "previous_response_id": first.json()["id"]}
    second = http.post("/v1/responses", json=body)
    assert second.status_code == 200, second.text
    sent = responses_upstream.requests[-1].json
    assert "previous_response_id" not in sent  # the upstream is shared by every tenant
    assert second.json()["previous_response_id"] == first.json()["id"]
    assert sent["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Search rivers"}],
        },
        CLIENT_BODY["input"][1],  # an upstream's encrypted reasoning goes back, with its id
        {k: v for k, v in whole_response("gpt-5-upstream")["output"][0].items() if k != "id"},
        {"role": "user", "content": "And then?"},
    ]


def test_a_translated_turn_continues_on_a_passthrough_route(
    http: httpx.Client, responses_upstream: FakeOpenAIResponses, compat: FakeOpenAI
) -> None:
    first = http.post("/v1/responses", json={"model": "compat-chat", "input": "Hi"})
    assert first.status_code == 200, first.text
    body = {"model": "gpt-pass", "input": "And then?", "previous_response_id": first.json()["id"]}
    second = http.post("/v1/responses", json=body)
    assert second.status_code == 200, second.text
    sent = responses_upstream.requests[-1].json["input"]
    assert [item.get("role") for item in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"][0]["text"] == compat.text
    assert not any("id" in item for item in sent)  # the gateway's ids mean nothing upstream


def test_azure_openai_passes_through_to_its_deployment(
    http: httpx.Client, responses_upstream: FakeOpenAIResponses
) -> None:
    body = {**CLIENT_BODY, "model": "az-pass"}
    answer = http.post("/v1/responses", json=body)
    assert answer.status_code == 200, answer.text
    sent = responses_upstream.requests[-1]
    assert sent.path == "/openai/v1/responses"
    assert sent.headers["api-key"] == "az-upstream-secret"
    assert sent.json == {**CLIENT_BODY, "model": "my-deployment"}
    assert answer.json()["model"] == "az-pass" and answer.json()["usage"]["credits"]
    with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as streamed:
        events = read_events(streamed.read().decode())
    assert check_event_order(events)["model"] == "az-pass"
    assert responses_upstream.requests[-1].json == {**sent.json, "stream": True}


def test_a_fallback_from_passthrough_to_translation_names_the_dropped_tools(
    http: httpx.Client, responses_upstream: FakeOpenAIResponses, compat: FakeOpenAI
) -> None:
    overloaded = {"error": {"message": "Overloaded", "type": "server_error", "code": None}}
    responses_upstream.enqueue(ResponsesReply(body=overloaded, status=503))
    body = {"model": "auto", "input": "Search rivers", "tools": [{"type": "web_search"}]}
    answer = http.post("/v1/responses", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-gateway-model"] == "compat-chat"
    assert answer.headers["x-gateway-dropped-tools"] == "web_search"
    assert answer.json()["output"][0]["content"][0]["text"] == compat.text


def test_an_openai_kind_without_the_responses_api_is_translated(
    http: httpx.Client, compat: FakeOpenAI
) -> None:
    body = {"model": "chat-only", "input": "Hello", "tools": [{"type": "web_search"}]}
    answer = http.post("/v1/responses", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-gateway-dropped-tools"] == "web_search"
    sent = compat.requests[-1]
    assert sent.path == "/v1/chat/completions" and sent.json["model"] == "model-b"
