"""The Responses API translated to upstreams of other formats: the Anthropic, Gemini and
Bedrock fakes (real HTTP servers) behind one gateway. Each upstream's text and tool-call streams
come out in OpenAI's event order, checked event by event; the sync answer is a `response`
object; a stream the upstream breaks mid-way ends in `response.failed`; the built-in tool a
client offers never reaches the upstream, and its reasoning items are not replayed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes import anthropic_upstream as anthropic
from tests.fakes import bedrock_upstream as bedrock
from tests.fakes import gemini_upstream as gemini
from tests.support.gateway_process import GatewayProcess, client_for, start_gateway
from tests.support.responses_events import check_event_order, stream_events

KEY, SECRET = "AKIDRESPONSES0001", "responses-throwaway-secret-for-the-fake"
BEDROCK_MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.claude]
kind = "anthropic"
base_url = "{anthropic}"
api_key = "sk-ant-upstream"
timeout_seconds = 5
stream_read_timeout_seconds = 5

[providers.gem]
kind = "gemini"
base_url = "{gemini}"
api_key = "g-upstream"
timeout_seconds = 5
stream_read_timeout_seconds = 5

[providers.bedrock]
kind = "bedrock"
region = "us-east-1"
base_url = "{bedrock}"
timeout_seconds = 5
stream_read_timeout_seconds = 5

[[models]]
id = "claude-chat"
provider = "claude"
upstream_model = "claude-sonnet-4-0"
capability = "chat"
max_output_tokens = 8192
pricing = {{ input_usd_per_mtok = 3, output_usd_per_mtok = 15 }}

[[models]]
id = "gem-chat"
provider = "gem"
upstream_model = "gemini-2.5-flash"
capability = "chat"
max_output_tokens = 1024
pricing = {{ input_usd_per_mtok = 3, output_usd_per_mtok = 15 }}

[[models]]
id = "claude-bedrock"
provider = "bedrock"
upstream_model = "{bedrock_model}"
capability = "chat"
max_output_tokens = 1024
pricing = {{ input_usd_per_mtok = 3, output_usd_per_mtok = 15 }}

[tenants.default]
"""
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
ARGUMENTS = {"city": "Oslo"}


class Upstreams:
    def __init__(self) -> None:
        self.anthropic = anthropic.FakeAnthropic()
        self.gemini = gemini.FakeGemini()
        self.bedrock = bedrock.FakeBedrock(credentials=(KEY, SECRET))


@pytest.fixture(scope="module")
def upstreams() -> Iterator[Upstreams]:
    fakes = Upstreams()
    stops = [fake.start_in_thread()[1] for fake in (fakes.anthropic, fakes.gemini, fakes.bedrock)]
    yield fakes
    for stop in stops:
        stop()


@pytest.fixture(scope="module")
def gateway(
    upstreams: Upstreams, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-responses-translated")
    config = CONFIG.format(
        anthropic=upstreams.anthropic.base_url,
        gemini=upstreams.gemini.base_url,
        bedrock=upstreams.bedrock.base_url,
        bedrock_model=BEDROCK_MODEL,
    )
    aws = {
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_SHARED_CREDENTIALS_FILE": str(workdir / "no-aws-credentials"),
        "AWS_CONFIG_FILE": str(workdir / "no-aws-config"),
    }
    process = start_gateway(workdir, config, extra_env=aws)
    yield process
    process.stop()


@pytest.fixture
def http(gateway: GatewayProcess) -> Iterator[httpx.Client]:
    assert gateway.api_key
    with client_for(gateway, gateway.api_key) as c:
        yield c


def _anthropic_tool_stream() -> anthropic.StreamReply:
    whole = anthropic.message(
        anthropic.text("Looking."),
        anthropic.tool_use("toolu_1", "get_weather", ARGUMENTS),
        stop_reason="tool_use",
    )
    return anthropic.StreamReply(message=whole)


def _gemini_tool_stream() -> gemini.StreamReply:
    first = gemini.response(gemini.candidate(gemini.text("Looking."), finish=None))
    last = gemini.response(
        gemini.candidate(gemini.function_call("get_weather", ARGUMENTS)),
        usage_metadata=gemini.usage(),
    )
    return gemini.StreamReply(events=[first, last])


def _bedrock_tool_stream() -> bedrock.StreamReply:
    arguments = json.dumps(ARGUMENTS)
    start = {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather"}}
    events: list[Any] = [
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Looking."}}),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("contentBlockStart", {"contentBlockIndex": 1, "start": start}),
        (
            "contentBlockDelta",
            {"contentBlockIndex": 1, "delta": {"toolUse": {"input": arguments[:6]}}},
        ),
        (
            "contentBlockDelta",
            {"contentBlockIndex": 1, "delta": {"toolUse": {"input": arguments[6:]}}},
        ),
        ("contentBlockStop", {"contentBlockIndex": 1}),
        ("messageStop", {"stopReason": "tool_use"}),
        ("metadata", {"usage": bedrock.usage(), "metrics": {"latencyMs": 90}}),
    ]
    return bedrock.StreamReply(events=events)


class Target:
    """One upstream as the tests drive it: its model, fake, default text and scripted replies."""

    def __init__(
        self,
        model: str,
        fake: Callable[[Upstreams], Any],
        text: str,
        tool_stream: Callable[[], Any],
        broken_stream: Callable[[], Any],
    ) -> None:
        self.model = model
        self.fake = fake
        self.text = text
        self.tool_stream = tool_stream
        self.broken_stream = broken_stream


TARGETS = {
    "anthropic": Target(
        "claude-chat",
        lambda u: u.anthropic,
        anthropic.DEFAULT_TEXT,
        _anthropic_tool_stream,
        lambda: anthropic.StreamReply(break_after=5),
    ),
    "gemini": Target(
        "gem-chat",
        lambda u: u.gemini,
        gemini.DEFAULT_TEXT,
        _gemini_tool_stream,
        lambda: gemini.StreamReply(break_after=2),
    ),
    "bedrock": Target(
        "claude-bedrock",
        lambda u: u.bedrock,
        bedrock.DEFAULT_TEXT,
        _bedrock_tool_stream,
        lambda: bedrock.StreamReply(break_after=3),
    ),
}


@pytest.fixture(params=list(TARGETS))
def target(request: pytest.FixtureRequest, upstreams: Upstreams) -> Iterator[Target]:
    chosen = TARGETS[request.param]
    chosen.fake(upstreams).requests.clear()
    yield chosen


def test_a_text_stream_in_openais_order(http: httpx.Client, target: Target) -> None:
    body = {"model": target.model, "instructions": "Be brief.", "input": "Hello"}
    final = check_event_order(stream_events(http, body))
    assert final["status"] == "completed" and final["model"] == target.model
    (message,) = final["output"]
    assert message["content"][0]["text"] == target.text
    assert final["usage"]["input_tokens"] == 12 and final["usage"]["output_tokens"] == 6


def test_a_tool_call_stream_in_openais_order(
    http: httpx.Client, target: Target, upstreams: Upstreams
) -> None:
    fake = target.fake(upstreams)
    fake.enqueue(target.tool_stream())
    history = [
        {"role": "user", "content": "Weather?"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-opaque"},
    ]
    body = {"model": target.model, "input": history, "tools": [WEATHER, {"type": "web_search"}]}
    final = check_event_order(stream_events(http, body))
    message, call = final["output"]
    assert message["content"][0]["text"] == "Looking."
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == ARGUMENTS and call["call_id"]
    sent = fake.requests[-1].body.decode()
    assert "get_weather" in sent
    assert "web_search" not in sent and "gAAAA-opaque" not in sent


def test_a_whole_response(http: httpx.Client, target: Target) -> None:
    answer = http.post("/v1/responses", json={"model": target.model, "input": "Hello"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "response" and body["status"] == "completed"
    assert body["output"][0]["content"][0]["text"] == target.text
    assert body["usage"]["total_tokens"] == 18 and body["usage"]["credits"]


def test_a_stream_broken_mid_way_ends_failed(
    http: httpx.Client, target: Target, upstreams: Upstreams
) -> None:
    target.fake(upstreams).enqueue(target.broken_stream())
    events = stream_events(http, {"model": target.model, "input": "Hello"})
    final = check_event_order(events)
    assert events[-1]["type"] == "response.failed"
    assert final["error"]["code"] == "server_error" and final["error"]["message"]


def test_claudes_signed_thinking_survives_a_tool_loop(
    http: httpx.Client, upstreams: Upstreams
) -> None:
    fake = upstreams.anthropic
    thought = "The user wants the weather."
    signed = anthropic.thinking(thought, anthropic.signature_of(thought))
    whole = anthropic.message(
        signed, anthropic.tool_use("toolu_9", "get_weather", ARGUMENTS), stop_reason="tool_use"
    )
    fake.enqueue(anthropic.StreamReply(message=whole))
    history: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    body = {"model": "claude-chat", "tools": [WEATHER], "reasoning": {"effort": "low"}}
    final = check_event_order(stream_events(http, {**body, "input": history}))
    reasoning, call = final["output"]
    assert reasoning["type"] == "reasoning" and reasoning["encrypted_content"]
    assert call["type"] == "function_call" and call["call_id"] == "toolu_9"
    assert reasoning["content"] == [{"type": "reasoning_text", "text": thought}]
    history += [
        *final["output"],
        {"type": "function_call_output", "call_id": "toolu_9", "output": "Sunny"},
    ]
    answer = http.post("/v1/responses", json={**body, "input": history})
    assert answer.status_code == 200, answer.text
    turn = fake.requests[-1].json["messages"][1]
    assert turn["role"] == "assistant"
    assert turn["content"][0] == signed  # first, with its signature, as Anthropic wants
    assert fake.requests[-1].json["thinking"]["type"] == "enabled"
