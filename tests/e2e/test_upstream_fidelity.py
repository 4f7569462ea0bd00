"""A `gateway serve` process in front of fake Anthropic and Gemini upstreams replaying traffic
recorded from the real APIs, driven by the `openai` SDK as a client would: a tool loop with
reasoning over two turns (the SDK keeps the extension fields when the client sends the
assistant message back), call ids, prompt caching in `usage`, and broken streams charged from
what the upstream reported."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.anthropic_upstream import Reply as AnthropicReply
from tests.fakes.anthropic_upstream import StreamReply as AnthropicStream
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.gemini_upstream import Reply as GeminiReply
from tests.fakes.gemini_upstream import StreamReply as GeminiStream
from tests.fakes.recorded import load, sse_events
from tests.support.gateway_process import GatewayProcess, start_gateway

CONFIG = """
[gateway]
starting_grant_credits = 1000

[providers.claude]
kind = "anthropic"
base_url = "{anthropic}"
api_key = "sk-ant-upstream-secret"
timeout_seconds = 5
stream_read_timeout_seconds = 5
cache_control = {{ "claude-cached" = "5m" }}

[providers.gem]
kind = "gemini"
base_url = "{gemini}"
api_key = "g-upstream-secret"
timeout_seconds = 5
stream_read_timeout_seconds = 5

[[models]]
id = "claude-sonnet"
provider = "claude"
upstream_model = "claude-sonnet-4-0"
capability = "chat"
max_output_tokens = 4096
[models.pricing]  # Claude Sonnet 4's list prices, USD per million tokens
input_usd_per_mtok = 3
output_usd_per_mtok = 15
cached_input_usd_per_mtok = 0.3
cache_write_usd_per_mtok = 3.75

[[models]]
id = "claude-cached"
provider = "claude"
upstream_model = "claude-cached"
capability = "chat"
max_output_tokens = 4096
[models.pricing]  # Claude Sonnet 4's list prices, USD per million tokens
input_usd_per_mtok = 3
output_usd_per_mtok = 15
cached_input_usd_per_mtok = 0.3
cache_write_usd_per_mtok = 3.75

[[models]]
id = "gemini-flash"
provider = "gem"
upstream_model = "gemini-3.6-flash"
capability = "chat"
max_output_tokens = 4096
pricing = {{ input_usd_per_mtok = 3, output_usd_per_mtok = 15 }}

[routing.auto]
chat = ["claude-sonnet"]

[tenants.default]
"""
COUNTRY_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_user_country",
        "description": "",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}
QUESTION: ChatCompletionMessageParam = {
    "role": "user",
    "content": "What is the largest city in the user country?",
}


@pytest.fixture(scope="module")
def claude() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gemini() -> Iterator[FakeGemini]:
    fake = FakeGemini()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    claude: FakeAnthropic, gemini: FakeGemini, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-fidelity")
    config = CONFIG.format(anthropic=claude.base_url, gemini=gemini.base_url)
    process = start_gateway(workdir, config)
    yield process
    process.stop()


@pytest.fixture
def client(gateway: GatewayProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


def last_charge(gateway: GatewayProcess) -> dict[str, Any]:
    page = httpx.get(
        f"{gateway.base_url}/wallet/ledger",
        params={"limit": "1"},
        headers={"Authorization": f"Bearer {gateway.api_key}"},
    ).json()
    (entry,) = page["data"]
    assert entry["kind"] == "charge"
    return cast(dict[str, Any], entry)


def test_a_tool_loop_with_reasoning_over_two_turns(
    client: openai.OpenAI, claude: FakeAnthropic
) -> None:
    first, second = load("anthropic_tool_loop_thinking")["exchanges"]
    claude.enqueue(AnthropicReply(message=first["body"]))
    claude.enqueue(AnthropicReply(message=second["body"]))
    turn_one = client.chat.completions.create(
        model="claude-sonnet",
        messages=[QUESTION],
        tools=[COUNTRY_TOOL],
        reasoning_effort="medium",
    )
    message = turn_one.choices[0].message
    extra = message.model_extra or {}
    recorded_thinking = first["body"]["content"][0]
    assert extra["reasoning_content"] == recorded_thinking["thinking"]
    assert extra["thinking_blocks"][0]["signature"] == recorded_thinking["signature"]
    assert message.tool_calls is not None
    (call,) = message.tool_calls
    assert call.type == "function" and call.function.arguments == "{}"
    # 398 input tokens at $3 and 155 output tokens at $15 per million, 1000 credits per USD
    assert (turn_one.usage.model_extra or {})["credits"] == "3.5190"  # type: ignore[union-attr]

    # The client sends the SDK's message object back as it came, then the tool's result.
    turn_two = client.chat.completions.create(
        model="claude-sonnet",
        messages=[
            QUESTION,
            cast(ChatCompletionMessageParam, message),
            {"role": "tool", "tool_call_id": call.id, "content": "Mexico"},
        ],
        tools=[COUNTRY_TOOL],
        reasoning_effort="medium",
    )
    assert turn_two.choices[0].message.content == second["body"]["content"][0]["text"]
    sent = claude.requests[-1].json
    assert "thinking" in sent
    # What Anthropic received in the recorded, accepted second request: thinking block with
    # its signature first, then the text, then the tool call.
    assert sent["messages"][1] == second["request"]["messages"][1]


def test_forced_tool_choice_with_reasoning_is_refused_naming_the_field(
    client: openai.OpenAI, claude: FakeAnthropic
) -> None:
    before = len(claude.requests)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="claude-sonnet",
            messages=[QUESTION],
            tools=[COUNTRY_TOOL],
            tool_choice="required",
            reasoning_effort="low",
        )
    assert refused.value.code == "invalid_request"
    assert "tool_choice: Anthropic extended thinking" in refused.value.message
    assert len(claude.requests) == before


def test_a_stream_cut_after_its_thinking_is_charged_from_anthropics_counts(
    client: openai.OpenAI, claude: FakeAnthropic, gateway: GatewayProcess
) -> None:
    (exchange,) = load("anthropic_thinking_stream")["exchanges"]
    events = sse_events(exchange["sse"])
    stop = next(i for i, e in enumerate(events) if e.startswith(b"event: content_block_stop"))
    claude.enqueue(AnthropicStream(events=events, break_after=stop + 1))
    stream = client.chat.completions.create(
        model="claude-sonnet",
        messages=[{"role": "user", "content": "How do I cross the street?"}],
        reasoning_effort="minimal",
        stream=True,
    )
    reasoning = ""
    blocks: list[Any] = []
    with pytest.raises(openai.APIError):
        for chunk in stream:
            for choice in chunk.choices:
                extra = choice.delta.model_extra or {}
                reasoning += extra.get("reasoning_content") or ""
                blocks += extra.get("thinking_blocks") or ()
    assert len(reasoning) == 202 and blocks[0]["thinking"] == reasoning
    # message_start: 43 input tokens, 1 output token; then 202 characters of thinking
    # delivered, max(1, ceil(202 / 4)) = 51 output tokens: 43 x $3 + 51 x $15 per million
    # = 0.8940 credits.
    assert last_charge(gateway)["amount_credits"] == "-0.8940"


def test_a_gemini_stream_cut_after_its_thinking_is_charged_from_geminis_counts(
    client: openai.OpenAI, gemini: FakeGemini, gateway: GatewayProcess
) -> None:
    (exchange,) = load("gemini_stream_usage")["exchanges"]
    gemini.enqueue(GeminiStream(events=sse_events(exchange["sse"]), break_after=1))
    stream = client.chat.completions.create(
        model="gemini-flash",
        messages=[{"role": "user", "content": "Count from 1 to 30."}],
        stream=True,
    )
    with pytest.raises(openai.APIError):
        for _ in stream:
            pass
    # The first event's usageMetadata: 18 prompt tokens, 31 candidates + 35 thoughts tokens:
    # 18 x $3 + 66 x $15 per million = 1.0440 credits.
    assert last_charge(gateway)["amount_credits"] == "-1.0440"


def test_gemini_call_ids_go_back_with_the_sdks_message(
    client: openai.OpenAI, gemini: FakeGemini
) -> None:
    gemini.enqueue(GeminiReply(body=load("gemini_function_call_ids")["response"]))
    tool: ChatCompletionToolParam = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    question: ChatCompletionMessageParam = {"role": "user", "content": "Denver and Moab?"}
    first = client.chat.completions.create(model="gemini-flash", messages=[question], tools=[tool])
    message = first.choices[0].message
    assert [c.id for c in message.tool_calls or ()] == ["call_4162774", "call_4162775"]
    client.chat.completions.create(
        model="gemini-flash",
        messages=[
            question,
            cast(ChatCompletionMessageParam, message),
            {"role": "tool", "tool_call_id": "call_4162775", "content": "30C"},
            {"role": "tool", "tool_call_id": "call_4162774", "content": "12C"},
        ],
        tools=[tool],
    )
    responses = gemini.requests[-1].json["contents"][2]["parts"]
    assert [
        (p["functionResponse"]["id"], p["functionResponse"]["response"]) for p in responses
    ] == [
        ("call_4162775", {"content": "30C"}),
        ("call_4162774", {"content": "12C"}),
    ]


def test_prompt_caching_shows_in_usage_and_is_billed_exactly(
    client: openai.OpenAI, claude: FakeAnthropic
) -> None:
    answer = load("anthropic_cache_usage")["answers"][1]["body"]
    claude.enqueue(AnthropicReply(message=answer))
    completion = client.chat.completions.create(
        model="claude-cached",
        messages=[
            {"role": "system", "content": "You explain programming languages."},
            {"role": "user", "content": "Please explain what Python is."},
        ],
    )
    sent = claude.requests[-1].json
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    usage = completion.usage
    assert usage is not None and usage.prompt_tokens_details is not None
    assert usage.prompt_tokens == 3 + 1111 + 418
    assert usage.prompt_tokens_details.cached_tokens == 1111
    assert (usage.prompt_tokens_details.model_extra or {})["cache_creation_tokens"] == 418
    # 3 x $3 + 1111 read x $0.30 + 418 written x $3.75 + 33 x $15, per million tokens
    expected = (3 * 3 + Decimal("1111") * Decimal("0.3") + 418 * Decimal("3.75") + 33 * 15) / 1000
    assert (usage.model_extra or {})["credits"] == f"{expected:.4f}" == "2.4048"
    assert json.dumps(sent).count("cache_control") == 1  # no tools: the system prompt only
