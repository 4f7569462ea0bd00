"""The Messages API (`/v1/messages`) in front of upstreams that do not speak it (the simulator
and an OpenAI-format fake): the official `anthropic` SDK gets Anthropic's messages and events,
translated from the service's own format, charged as chat is; what such an upstream cannot
carry is refused with a 400 naming the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from tests.fakes.openai_upstream import FakeOpenAI, Reply, StreamReply
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.waiting import wait_until

CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.sim]
kind = "simulator"

[providers.chat]
kind = "openai"
base_url = "{base_url}"
api_key = "sk-upstream"
timeout_seconds = 5

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
max_output_tokens = 256
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[[models]]
id = "up-chat"
provider = "chat"
upstream_model = "model-a"
capability = "chat"
max_output_tokens = 4096
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[routing.auto]
chat = ["sim-chat-1"]

[tenants.default]
"""
HELLO: list[anthropic.types.MessageParam] = [{"role": "user", "content": "Hello there"}]
WEATHER: anthropic.types.ToolParam = {
    "name": "get_weather",
    "description": "Weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    upstream: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-messages-translated")
    process = start_gateway(workdir, CONFIG.format(base_url=upstream.base_url))
    yield process
    process.stop()


@pytest.fixture
def client(gateway: GatewayProcess, upstream: FakeOpenAI) -> Iterator[anthropic.Anthropic]:
    upstream.requests.clear()
    root = gateway.base_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key=gateway.api_key, max_retries=0) as c:
        yield c


def _completion(message: dict[str, Any], finish: str, usage: dict[str, Any]) -> dict[str, Any]:
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion",
        "created": 1,
        "model": "model-a",
        "choices": [choice],
        "usage": usage,
    }


def test_a_message_from_the_simulator(client: anthropic.Anthropic) -> None:
    answer = client.messages.create(model="auto", max_tokens=64, messages=HELLO, system="Brief.")
    assert answer.type == "message" and answer.role == "assistant"
    assert answer.model == "sim-chat-1" and answer.stop_reason in ("end_turn", "max_tokens")
    (block,) = answer.content
    assert block.type == "text" and block.text
    assert answer.usage.input_tokens > 0 and answer.usage.output_tokens > 0
    assert (answer.usage.model_extra or {})["credits"]


def test_a_stream_from_the_simulator_accumulates_in_the_sdk(client: anthropic.Anthropic) -> None:
    kinds: list[str] = []
    credits = None
    with client.messages.stream(model="sim-chat-1", max_tokens=64, messages=HELLO) as stream:
        for event in stream:
            kinds.append(event.type)
            if event.type == "message_delta":
                credits = (event.usage.model_extra or {}).get("credits")
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 1
    (block,) = final.content
    assert block.type == "text" and len(block.text) > 10
    assert final.usage.output_tokens > 0 and final.usage.input_tokens > 0
    assert credits is not None and final.stop_reason in ("end_turn", "max_tokens")


def test_a_tool_round_trip_through_an_openai_upstream(
    client: anthropic.Anthropic, upstream: FakeOpenAI
) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }
    usage = {"prompt_tokens": 40, "completion_tokens": 10, "total_tokens": 50}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    upstream.enqueue(Reply(body=_completion(message, "tool_calls", usage)))
    first = client.messages.create(
        model="up-chat",
        max_tokens=300,
        messages=HELLO,
        tools=[WEATHER],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        thinking={"type": "enabled", "budget_tokens": 2000},
    )
    sent = upstream.requests[-1].json
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather of a city",
                "parameters": WEATHER["input_schema"],
            },
        }
    ]
    assert (sent["tool_choice"], sent["parallel_tool_calls"]) == ("required", False)
    assert sent["reasoning_effort"] == "low" and sent["max_completion_tokens"] == 300
    assert first.stop_reason == "tool_use"
    (use,) = first.content
    assert use.type == "tool_use" and (use.id, use.name, use.input) == (
        "call_1",
        "get_weather",
        {"city": "Oslo"},
    )
    assert (first.usage.input_tokens, first.usage.output_tokens) == (40, 10)
    # (40 x 5 + 10 x 15) / 1e6 USD x 1000 credits per USD
    assert (first.usage.model_extra or {})["credits"] == "0.3500"

    client.messages.create(
        model="up-chat",
        max_tokens=300,
        messages=[
            *HELLO,
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "4C"},
                    {"type": "text", "text": "And tomorrow?"},
                ],
            },
        ],
        tools=[WEATHER],
    )
    turns = upstream.requests[-1].json["messages"]
    assert turns[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {**call, "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}
        ],
    }
    assert turns[2] == {"role": "tool", "tool_call_id": "call_1", "content": "4C"}
    assert turns[3] == {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]}


def test_a_streamed_tool_call_through_an_openai_upstream(
    client: anthropic.Anthropic, upstream: FakeOpenAI
) -> None:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "model-a"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {**base, "choices": [choice]}

    start = {"index": 0, "id": "call_7", "type": "function", "function": {"name": "get_weather"}}
    chunks = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Need the weather."}),
        chunk({"content": "Let me check."}),
        chunk({"tool_calls": [{**start, "function": {**start["function"], "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Rome"}'}}]}),
        chunk({}, "tool_calls"),
        {**base, "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 12}},
    ]
    upstream.enqueue(StreamReply(chunks=chunks))
    with client.messages.stream(
        model="up-chat", max_tokens=300, messages=HELLO, tools=[WEATHER]
    ) as stream:
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text", "tool_use"]
    thought, said, use = final.content
    assert thought.type == "thinking" and thought.thinking == "Need the weather."
    assert said.type == "text" and said.text == "Let me check."
    assert use.type == "tool_use" and (use.id, use.input) == ("call_7", {"city": "Rome"})
    assert final.stop_reason == "tool_use"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (30, 12)


def test_what_the_upstream_cannot_carry_is_refused_naming_the_field(
    client: anthropic.Anthropic, upstream: FakeOpenAI
) -> None:
    document = {"type": "document", "source": {"type": "file", "file_id": "file_011CNha8i"}}
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(
            model="auto",
            max_tokens=10,
            messages=[{"role": "user", "content": [{"type": "text", "text": "Read"}, document]}],
        )
    fields = refused.value.body["error"]["details"]["fields"]  # type: ignore[index]
    assert fields == [
        {
            "field": "messages[0].content[1].source.type",
            "message": "'file' document sources are only taken by Anthropic upstreams",
        }
    ]
    assert refused.value.error_code == "invalid_request"
    with pytest.raises(anthropic.BadRequestError) as unknown:
        client.messages.create(
            model="up-chat", max_tokens=10, messages=HELLO, extra_body={"container": "c1"}
        )
    assert "container" in unknown.value.message
    # A server tool Anthropic bills per use is refused whatever the upstream.
    with pytest.raises(anthropic.BadRequestError) as unpriced:
        client.messages.create(
            model="auto",
            max_tokens=10,
            messages=HELLO,
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
        )
    assert unpriced.value.body["error"]["details"]["fields"][0]["field"] == "tools[0].type"  # type: ignore[index]
    # Anthropic's own rules, whatever the upstream.
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(
            model="auto",
            max_tokens=10,
            messages=[{"role": "user", "content": 5}],  # type: ignore[typeddict-item]
        )
    assert bad.value.body["error"]["details"]["fields"][0]["field"] == "messages[0].content"  # type: ignore[index]
    assert upstream.requests == []


def test_count_tokens_is_the_gateways_estimate(
    gateway: GatewayProcess, client: anthropic.Anthropic
) -> None:
    body = {"model": "auto", "messages": HELLO}
    raw = json.dumps(body).encode()
    with httpx.Client(base_url=gateway.base_url.removesuffix("/v1")) as http:
        answer = http.post(
            "/v1/messages/count_tokens",
            content=raw,
            headers={"x-api-key": str(gateway.api_key), "content-type": "application/json"},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"input_tokens": len(raw) // 4 + 1}
    assert client.messages.count_tokens(model="auto", messages=HELLO).input_tokens > 0


def test_a_mid_conversation_system_message_is_answered_and_the_tuning_fields_named(
    client: anthropic.Anthropic, upstream: FakeOpenAI, gateway: GatewayProcess
) -> None:
    """As Claude Code sends a conversation: a `system` message mid-way, `context_management`
    and `speed: null`; the simulator answers, and OpenAI is sent the instruction in place."""
    turns: list[dict[str, Any]] = [
        *HELLO,
        {"role": "assistant", "content": "Hello."},
        {"role": "system", "content": "Answer in French from now on."},
        {"role": "user", "content": "And now?"},
    ]
    extra = {"context_management": {"edits": []}, "speed": None}
    answers = []
    for model in ("sim-chat-1", "up-chat"):
        raw = client.beta.messages.with_raw_response.create(
            model=model,
            max_tokens=64,
            messages=turns,  # type: ignore[arg-type]
            extra_body=extra,
        )
        answers.append(raw)
        answer = raw.parse()
        assert raw.http_response.headers["x-gateway-dropped-fields"] == "context_management"
        assert answer.id.startswith("msg_") and answer.content[0].type == "text"
    sent = upstream.requests[-1].json
    assert sent["messages"][2] == {"role": "system", "content": "Answer in French from now on."}
    assert "context_management" not in sent and "speed" not in sent
    request_ids = [raw.http_response.headers["x-request-id"] for raw in answers]

    def logged() -> list[Any]:
        by_id = {record.get("request_id"): record for record in gateway.log_records()}
        return [by_id[rid].get("dropped_fields") for rid in request_ids if rid in by_id]

    assert wait_until(logged, lambda seen: len(seen) == 2, what="the log lines") == [
        "context_management",
        "context_management",
    ]


def test_message_start_counts_the_prompt_and_the_last_delta_has_the_credits(
    client: anthropic.Anthropic,
) -> None:
    events: list[Any] = []
    with client.messages.stream(model="sim-chat-1", max_tokens=32, messages=HELLO) as stream:
        events = list(stream)
        final = stream.get_final_message()
    start = events[0]
    assert start.type == "message_start" and start.message.id.startswith("msg_")
    assert start.message.usage.input_tokens > 0
    assert start.message.usage.input_tokens == final.usage.input_tokens
    (delta,) = [event for event in events if event.type == "message_delta"]
    assert (delta.usage.model_extra or {})["credits"]


def test_a_tool_call_directive_drives_one_round_of_an_agent_loop(
    client: anthropic.Anthropic,
) -> None:
    """`[[sim:tool_call]]` applies to the turn it is in: after the tool's result the model
    answers, so a loop driven by it ends."""
    turns: list[Any] = [{"role": "user", "content": "What is the weather? [[sim:tool_call]]"}]
    first = client.messages.create(
        model="sim-chat-1", max_tokens=64, messages=turns, tools=[WEATHER]
    )
    assert first.stop_reason == "tool_use"
    (use,) = [block for block in first.content if block.type == "tool_use"]
    turns += [
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "4C"}],
        },
    ]
    second = client.messages.create(
        model="sim-chat-1", max_tokens=64, messages=turns, tools=[WEATHER]
    )
    assert second.stop_reason in ("end_turn", "max_tokens")
    assert [block.type for block in second.content] == ["text"]


def test_a_json_schema_goes_to_openai_as_written(
    client: anthropic.Anthropic, upstream: FakeOpenAI
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    client.messages.create(
        model="up-chat",
        max_tokens=64,
        messages=HELLO,
        extra_body={"output_config": {"format": {"type": "json_schema", "schema": schema}}},
    )
    sent = upstream.requests[-1].json["response_format"]
    assert sent == {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}


def test_the_front_door_answers_as_anthropics_does(gateway: GatewayProcess) -> None:
    """Claude Code probes `HEAD /` at every start."""
    with httpx.Client(base_url=gateway.base_url.removesuffix("/v1")) as http:
        head = http.head("/")
        assert head.status_code == 200 and head.content == b""
        got = http.get("/")
        assert got.status_code == 200 and got.json()["object"] == "gateway"
