"""Recorded real exchanges with OpenAI's Responses API (`tests/fakes/recorded/openai_responses_*`,
each naming its source) replayed by the fake upstream through the gateway's passthrough: the
upstream receives the recorded request as the client sent it but for `model`; the client gets
the recorded answer (a stream byte for byte) but for `model` and the credits in `usage`; the
charge is what the recorded usage prices at the model's rates; OpenAI's own `response.failed`
and its 400 end as docs/api.md says. The same recorded request, translated to the simulator,
comes back in OpenAI's event order."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.fakes.openai_responses_upstream import (
    FakeOpenAIResponses,
    ResponsesReply,
    ResponsesStreamReply,
)
from tests.fakes.recorded import load, sse_events
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
stream_read_timeout_seconds = 5

[providers.sim]
kind = "simulator"

[[models]]
id = "rec-4o"
provider = "oai"
upstream_model = "gpt-4o"
capability = "chat"
markup = 1000
max_output_tokens = 4096
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[[models]]
id = "rec-55"
provider = "oai"
upstream_model = "gpt-5.5"
capability = "chat"
markup = 1000
max_output_tokens = 4096
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[[models]]
id = "sim-chat"
provider = "sim"
capability = "chat"
markup = 1000
max_output_tokens = 4096
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[tenants.default]
"""
GATEWAY_MODEL = {"gpt-4o": "rec-4o", "gpt-5.5": "rec-55"}
"""The gateway's model for each recorded request's model (its `upstream_model`)."""
INPUT_USD_PER_MTOK, OUTPUT_USD_PER_MTOK, CREDITS_PER_USD = 5, 15, 1000


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAIResponses]:
    fake = FakeOpenAIResponses()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    upstream: FakeOpenAIResponses, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    config = CONFIG.format(responses=upstream.base_url)
    process = start_gateway(tmp_path_factory.mktemp("gw-responses-recorded"), config)
    yield process
    process.stop()


@pytest.fixture
def http(gateway: GatewayProcess) -> Iterator[httpx.Client]:
    assert gateway.api_key
    with client_for(gateway, gateway.api_key) as c:
        yield c


def last_charge(http: httpx.Client) -> Decimal:
    entries = http.get("/v1/wallet/ledger", params={"limit": 1}).json()["data"]
    assert entries[0]["kind"] == "charge", entries
    return -Decimal(entries[0]["amount_credits"])


def ledger_size(http: httpx.Client) -> int:
    return len(http.get("/v1/wallet/ledger", params={"limit": 100}).json()["data"])


def priced(usage: dict[str, Any]) -> Decimal:
    """The credits the recorded usage costs at the test models' rates (no cached tokens)."""
    assert usage["input_tokens_details"]["cached_tokens"] == 0
    input_tokens, output_tokens = int(usage["input_tokens"]), int(usage["output_tokens"])
    usd = Decimal(input_tokens * INPUT_USD_PER_MTOK + output_tokens * OUTPUT_USD_PER_MTOK)
    return usd / 1_000_000 * CREDITS_PER_USD


def client_body(recorded_request: dict[str, Any]) -> dict[str, Any]:
    """The recorded request as a client of the gateway sends it: the gateway's model id."""
    return {**recorded_request, "model": GATEWAY_MODEL[recorded_request["model"]]}


def as_sent(recorded_request: dict[str, Any]) -> dict[str, Any]:
    """What the gateway sends for the recorded request: the same body, but a whole call goes
    without `stream` (the recorder's SDK wrote `stream: false`, OpenAI's default)."""
    if recorded_request.get("stream") is False:
        return {k: v for k, v in recorded_request.items() if k != "stream"}
    return recorded_request


def split_credits(usage: dict[str, Any]) -> Decimal:
    """Take the gateway's two credit fields off `usage`; the charged credits. The USD
    reference is the credits at the tenant's rate, to four decimals (docs/api.md)."""
    credits = Decimal(usage.pop("credits"))
    usd = Decimal(usage.pop("credits_usd_reference"))
    assert usd.as_tuple().exponent == -4
    assert abs(usd - credits / CREDITS_PER_USD) <= Decimal("0.00005")
    return credits


@pytest.mark.parametrize("fixture", ["openai_responses_text", "openai_responses_function_call"])
def test_a_recorded_answer_passes_through(
    http: httpx.Client, upstream: FakeOpenAIResponses, fixture: str
) -> None:
    for exchange in load(fixture)["exchanges"]:
        upstream.enqueue(ResponsesReply(body=exchange["body"]))
        body = client_body(exchange["request"])
        answer = http.post("/v1/responses", json=body)
        assert answer.status_code == 200, answer.text
        assert upstream.requests[-1].json == as_sent(exchange["request"])
        got = answer.json()
        credits = split_credits(got["usage"])
        assert got == {**exchange["body"], "model": body["model"]}
        assert credits == priced(exchange["body"]["usage"]) == last_charge(http)


def test_a_recorded_stream_passes_through_byte_for_byte(
    http: httpx.Client, upstream: FakeOpenAIResponses
) -> None:
    for exchange in load("openai_responses_stream_function_call")["exchanges"]:
        recorded: str = exchange["sse"]
        upstream.enqueue(ResponsesStreamReply(raw=recorded.encode()))
        body = client_body(exchange["request"])
        with http.stream("POST", "/v1/responses", json=body) as answer:
            assert answer.status_code == 200
            got = answer.read()
        assert upstream.requests[-1].json == exchange["request"]
        got_events, recorded_events = sse_events(got.decode()), sse_events(recorded)
        assert len(got_events) == len(recorded_events)
        *got_before, got_last = got_events
        *recorded_before, recorded_last = recorded_events
        upstream_model = json.loads(recorded_last.split(b"data: ", 1)[1])["response"]["model"]
        renamed = f'"model":"{upstream_model}"'.encode(), f'"model":"{body["model"]}"'.encode()
        assert got_before == [event.replace(*renamed) for event in recorded_before]
        final = read_events(got_last.decode())[0]
        credits = split_credits(final["response"]["usage"])
        expected = read_events(recorded_last.decode())[0]
        expected["response"]["model"] = body["model"]
        assert final == expected
        assert credits == priced(expected["response"]["usage"]) == last_charge(http)
        # OpenAI's own order (its reasoning item is added without a `status`, which
        # check_event_order asks of the gateway's translated streams): numbered 0, 1, 2, ...
        numbers = [event["sequence_number"] for event in read_events(got.decode())]
        assert numbers == list(range(len(got_events)))


def test_a_recorded_response_failed_arrives_once_charged_by_the_rule(
    http: httpx.Client, upstream: FakeOpenAIResponses
) -> None:
    """OpenAI's `response.failed` (its usage null) is the stream's one terminal event, as
    sent but for `model` and the credits; with no counts the call is charged by the rule of
    usage the upstream did not give (docs/api.md): the body's bytes / 4 + 1 input tokens, no
    output (none was delivered)."""
    request = load("openai_responses_stream_function_call")["exchanges"][0]["request"]
    sent = json.dumps(client_body(request), separators=(",", ":")).encode()
    for exchange in load("openai_responses_failed")["exchanges"]:
        upstream.enqueue(ResponsesStreamReply(raw=exchange["sse"].encode()))
        headers = {"content-type": "application/json"}
        with http.stream("POST", "/v1/responses", content=sent, headers=headers) as answer:
            assert answer.status_code == 200
            (got,) = read_events(answer.read().decode())
        assert upstream.requests[-1].json == request
        (recorded,) = read_events(exchange["sse"])
        assert recorded["response"]["usage"] is None
        credits = split_credits(got["response"]["usage"])
        expected = copy.deepcopy(recorded)
        expected["response"] |= {"model": "rec-55", "usage": got["response"]["usage"]}
        assert got == expected
        input_tokens = len(sent) // 4 + 1
        charge = Decimal(input_tokens * INPUT_USD_PER_MTOK * CREDITS_PER_USD) / 1_000_000
        assert credits == charge == last_charge(http)


def test_openais_recorded_400_is_the_gateways_invalid_request_uncharged(
    http: httpx.Client, upstream: FakeOpenAIResponses
) -> None:
    (exchange,) = load("openai_responses_error_400")["exchanges"]
    recorded_error = exchange["body"]["error"]
    entries = ledger_size(http)
    called = len(upstream.requests)
    # The recorded request is refused by the gateway itself, naming the field as OpenAI did.
    refused = http.post("/v1/responses", json=client_body(exchange["request"]))
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == recorded_error["param"] == "temperature"
    assert refused.json()["error"]["type"] == recorded_error["type"]
    assert len(upstream.requests) == called
    # A request the gateway accepts, rejected upstream with the recorded answer.
    upstream.enqueue(ResponsesReply(body=exchange["body"], status=exchange["status"]))
    valid = {k: v for k, v in client_body(exchange["request"]).items() if k != "temperature"}
    rejected = http.post("/v1/responses", json=valid)
    assert upstream.requests[-1].json == {
        k: v for k, v in exchange["request"].items() if k != "temperature"
    }
    assert rejected.status_code == 400
    error = rejected.json()["error"]
    assert error["code"] == "invalid_request" and error["type"] == "invalid_request_error"
    assert error["message"] == f"The model rejected the request: {recorded_error['message']}"
    assert error["retryable"] is False
    assert ledger_size(http) == entries  # nothing charged


def test_the_recorded_request_translated_keeps_openais_event_order(http: httpx.Client) -> None:
    """The recorded streamed request (function tool, encrypted reasoning asked) sent to the
    simulator: translated, and answered in OpenAI's order, charged from the counts."""
    request = load("openai_responses_stream_function_call")["exchanges"][0]["request"]
    with http.stream("POST", "/v1/responses", json={**request, "model": "sim-chat"}) as answer:
        assert answer.status_code == 200
        events = read_events(answer.read().decode())
    final = check_event_order(events)
    assert final["model"] == "sim-chat" and final["tools"] == request["tools"]
    assert final["instructions"] == request["instructions"]
    credits = split_credits(final["usage"])
    assert credits == priced(final["usage"]) == last_charge(http)
