"""The Responses API (`POST /v1/responses`) on the embedded default (the simulator behind the
repository's own routing file), driven by the official openai SDK: `responses.create`,
`responses.stream` and `responses.parse`, a function-tool loop that ends in text, built-in tools
dropped and named, a stream broken mid-way ending in `response.failed` and charged, an
Idempotency-Key replayed; each raw stream checked event by event. Stored responses and
`previous_response_id`: tests/e2e/test_responses_state.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.support.gateway_process import ROOT, GatewayProcess, client_for, start_gateway
from tests.support.responses_events import check_event_order, stream_events
from tests.support.waiting import wait_until

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


class Trip(BaseModel):
    town: str
    nights: int


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """`gateway serve` on the repository's routing file: the embedded default."""
    config = (ROOT / "config" / "gateway.toml").read_text()
    process = start_gateway(tmp_path_factory.mktemp("gw-responses"), config)
    yield process
    process.stop()


@pytest.fixture
def client(gateway: GatewayProcess) -> Iterator[openai.OpenAI]:
    assert gateway.api_key
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


@pytest.fixture
def http(gateway: GatewayProcess) -> Iterator[httpx.Client]:
    assert gateway.api_key
    with client_for(gateway, gateway.api_key) as c:
        yield c


def last_charge(gateway: GatewayProcess) -> Decimal:
    assert gateway.api_key
    with client_for(gateway, gateway.api_key) as http:
        entries = http.get("/v1/wallet/ledger", params={"limit": 1}).json()["data"]
    assert entries[0]["kind"] == "charge"
    return -Decimal(entries[0]["amount_credits"])


def test_create_answers_a_response_charged_as_chat(
    client: openai.OpenAI, gateway: GatewayProcess
) -> None:
    response = client.responses.create(model="auto", instructions="Be brief.", input="Hello")
    assert response.object == "response" and response.id.startswith("resp_")
    assert response.status == "completed" and response.model == "sim-chat-1"
    assert response.output_text and response.output[0].type == "message"
    usage = response.usage
    assert usage is not None and usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    credits = Decimal((usage.model_extra or {})["credits"])
    assert credits > 0 and last_charge(gateway) == credits


def test_stream_accumulates_in_the_sdk(client: openai.OpenAI) -> None:
    with client.responses.stream(model="auto", input="Tell me about rivers") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert len(deltas) > 1 and "".join(deltas) == final.output_text
    assert final.status == "completed" and final.usage is not None


def test_a_streamed_function_call_accumulates_in_the_sdk(client: openai.OpenAI) -> None:
    with client.responses.stream(model="auto", input="Weather in Oslo?", tools=[WEATHER]) as s:
        deltas = [e.delta for e in s if e.type == "response.function_call_arguments.delta"]
        final = s.get_final_response()
    (call,) = final.output
    assert call.type == "function_call" and "".join(deltas) == call.arguments
    assert json.loads(call.arguments)["city"]


def test_parse_gives_the_pydantic_model(client: openai.OpenAI) -> None:
    for number in range(2):
        parsed = client.responses.parse(
            model="sim-chat-pro", input=f"Plan trip number {number}.", text_format=Trip
        )
        assert isinstance(parsed.output_parsed, Trip), parsed.output_text


def test_a_function_tool_loop_ends_in_text(client: openai.OpenAI) -> None:
    history: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = client.responses.create(model="auto", input=history, tools=[WEATHER])
    (call,) = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert "city" in json.loads(call.arguments)
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"})
    second = client.responses.create(model="auto", input=history, tools=[WEATHER])
    assert second.output_text and second.output[-1].type == "message"


def test_streams_keep_openais_event_order(http: httpx.Client) -> None:
    for body in (
        {"model": "auto", "input": "Hello"},
        {"model": "auto", "input": "Weather in Oslo?", "tools": [WEATHER]},
        {"model": "auto", "input": "Hello [[sim:tokens=40]]", "max_output_tokens": 5},
    ):
        final = check_event_order(stream_events(http, body))
        assert final["model"] == "sim-chat-1"
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}


def test_built_in_tools_are_dropped_and_named(
    client: openai.OpenAI, gateway: GatewayProcess
) -> None:
    raw = client.responses.with_raw_response.create(
        model="auto",
        input="Search the web for rivers",
        tools=[{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["vs_1"]}],
    )
    assert raw.headers["x-gateway-dropped-tools"] == "web_search,file_search"
    assert raw.parse().output_text
    request_id = raw.headers["x-request-id"]
    (line,) = wait_until(  # the line is written once the answer went out
        lambda: [r for r in gateway.log_records() if r.get("request_id") == request_id],
        what="the call's log line",
    )
    assert line["dropped_tools"] == "web_search,file_search" and line["dialect"] == "responses"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="auto",
            input="Search",
            tools=[WEATHER, {"type": "web_search"}],
            tool_choice={"type": "web_search"},
        )
    error = caught.value.body
    assert isinstance(error, dict) and error["code"] == "invalid_request"
    assert error["param"] == "tool_choice" and "web_search" in error["message"]


def test_input_tokens_is_an_estimate(http: httpx.Client) -> None:
    answer = http.post("/v1/responses/input_tokens", json={"model": "auto", "input": "Hi " * 40})
    assert answer.status_code == 200
    body = answer.json()
    assert body["object"] == "response.input_tokens" and body["input_tokens"] > 10


def test_a_stream_broken_mid_way_ends_failed_and_is_charged(
    http: httpx.Client, gateway: GatewayProcess
) -> None:
    events = stream_events(http, {"model": "auto", "input": "Hello [[sim:fail_after=3]]"})
    final = check_event_order(events)
    assert events[-1]["type"] == "response.failed"
    assert final["error"]["code"] == "server_error"
    assert [e["type"] for e in events].count("response.output_text.delta") == 3
    assert last_charge(gateway) > 0


def test_an_idempotency_key_replays_the_response(http: httpx.Client) -> None:
    body = {"model": "auto", "input": "Hello once"}
    headers = {"Idempotency-Key": "responses-once"}
    first = http.post("/v1/responses", json=body, headers=headers)
    again = http.post("/v1/responses", json=body, headers=headers)
    assert first.status_code == again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "Hi", "max_output_tokens": 100_000}, "max_output_tokens"),
        ({"input": []}, "input"),
        ({"input": "Hi", "reasoning": {"effort": "huge"}}, "reasoning.effort"),
    ],
)
def test_refusals_name_the_fields_the_client_sent(
    http: httpx.Client, body: dict[str, Any], param: str
) -> None:
    answer = http.post("/v1/responses", json={"model": "sim-chat-1", **body})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == param and error["message"].startswith(f"{param}: ")
