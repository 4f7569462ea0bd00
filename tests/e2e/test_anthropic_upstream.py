"""The gateway in front of an Anthropic upstream (a fake one, over real HTTP), driven by the
official `openai` SDK: what the upstream receives, answers and streams in OpenAI shape, usage
and credits, and typed errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)

from tests.fakes.anthropic_upstream import (
    DEFAULT_TEXT,
    FakeAnthropic,
    Reply,
    StreamReply,
    error_event,
    events_for,
    message,
    text,
    thinking,
    tool_use,
)
from tests.support.gateway_process import GatewayProcess, start_gateway

CONFIG = """
[gateway]
starting_grant_credits = 1000

[providers.claude]
kind = "anthropic"
base_url = "{base_url}"
api_key = "sk-ant-upstream-secret"
anthropic_version = "2023-06-01"
timeout_seconds = 2
stream_read_timeout_seconds = 2

[[models]]
id = "claude-chat"
provider = "claude"
upstream_model = "claude-upstream"
capability = "chat"
owned_by = "anthropic"
markup = 1000
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 5, cached_input_usd_per_mtok = 0.5, output_usd_per_mtok = 15 }}

[routing.auto]
chat = ["claude-chat"]

[tenants.default]
"""
MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello"},
]
WEATHER_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
TOOL_ANSWER = message(
    thinking("A tool is needed."),
    text("Checking."),
    tool_use("toolu_01", "get_weather", {"city": "Paris"}),
    stop_reason="tool_use",
    input_tokens=10,
    output_tokens=30,
    cache_read=100,
    cache_creation=20,
)


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    upstream: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-anthropic")
    process = start_gateway(workdir, CONFIG.format(base_url=upstream.base_url))
    yield process
    process.stop()


@pytest.fixture
def client(gateway: GatewayProcess, upstream: FakeAnthropic) -> Iterator[openai.OpenAI]:
    upstream.requests.clear()
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


def test_a_completion_and_what_the_upstream_receives(
    client: openai.OpenAI, upstream: FakeAnthropic
) -> None:
    completion = client.chat.completions.create(
        model="auto", messages=MESSAGES, max_tokens=20, temperature=0.2, stop="END"
    )
    sent = upstream.requests[-1]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-upstream-secret"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.json == {
        "model": "claude-upstream",
        "max_tokens": 20,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [text("Hello")]}],
        "temperature": 0.2,
        "stop_sequences": ["END"],
    }
    assert completion.model == "claude-chat" and completion.id.startswith("chatcmpl_")
    assert completion.choices[0].message.content == DEFAULT_TEXT
    assert completion.choices[0].finish_reason == "stop"
    usage = completion.usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (12, 6, 18)
    # (12 x 5 + 6 x 15) / 1e6 USD x 1000 credits per USD
    assert (usage.model_extra or {})["credits"] == "0.1500"


def test_tool_calls_thinking_and_cache_usage(
    client: openai.OpenAI, upstream: FakeAnthropic
) -> None:
    upstream.enqueue(Reply(message=TOOL_ANSWER))
    completion = client.chat.completions.create(
        model="claude-chat", messages=MESSAGES, tools=[WEATHER_TOOL], tool_choice="required"
    )
    sent = upstream.requests[-1].json
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather of a city",
            "input_schema": WEATHER_TOOL["function"].get("parameters"),
        }
    ]
    assert sent["tool_choice"] == {"type": "any"}
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking."
    assert (choice.message.model_extra or {})["reasoning_content"] == "A tool is needed."
    assert choice.message.tool_calls is not None
    (call,) = choice.message.tool_calls
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert (call.id, call.type, call.function.name) == ("toolu_01", "function", "get_weather")
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    usage = completion.usage
    assert usage is not None and usage.prompt_tokens_details is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (130, 30)
    assert usage.prompt_tokens_details.cached_tokens == 100
    details = usage.prompt_tokens_details.model_extra or {}
    assert details["cache_creation_tokens"] == 20
    assert "credits" in (usage.model_extra or {})

    # The tool result goes back as a user turn of tool_result blocks.
    client.chat.completions.create(
        model="claude-chat",
        messages=[
            *MESSAGES,
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_01", "content": "18C"},
        ],
        tools=[WEATHER_TOOL],
    )
    turns = upstream.requests[-1].json["messages"]
    assert turns[1] == {
        "role": "assistant",
        "content": [text("Checking."), tool_use("toolu_01", "get_weather", {"city": "Paris"})],
    }
    assert turns[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}],
    }


def test_a_stream_reassembles_with_usage(client: openai.OpenAI, upstream: FakeAnthropic) -> None:
    stream = client.chat.completions.create(
        model="claude-chat",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    content, finish, usage = "", None, None
    for chunk in stream:
        assert chunk.model == "claude-chat"
        for choice in chunk.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
        usage = chunk.usage or usage
    assert upstream.requests[-1].json["stream"] is True
    assert content == DEFAULT_TEXT and finish == "stop"
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (12, 6)
    assert (usage.model_extra or {})["credits"] == "0.1500"


def test_a_streamed_tool_call(client: openai.OpenAI, upstream: FakeAnthropic) -> None:
    upstream.enqueue(StreamReply(message=TOOL_ANSWER))
    stream = client.chat.completions.create(
        model="claude-chat", messages=MESSAGES, tools=[WEATHER_TOOL], stream=True
    )
    content, reasoning, finish = "", "", None
    calls: dict[int, dict[str, str]] = {}
    for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            content += delta.content or ""
            reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            for call in delta.tool_calls or ():
                into = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                into["id"] = call.id or into["id"]
                if call.function is not None:
                    into["name"] = call.function.name or into["name"]
                    into["arguments"] += call.function.arguments or ""
            finish = choice.finish_reason or finish
    assert (content, reasoning, finish) == ("Checking.", "A tool is needed.", "tool_calls")
    assert calls == {0: {"id": "toolu_01", "name": "get_weather", "arguments": '{"city":"Paris"}'}}


def test_typed_errors(client: openai.OpenAI, upstream: FakeAnthropic) -> None:
    upstream.enqueue(Reply.error(400, "invalid_request_error", "messages.0: bad content"))
    with pytest.raises(openai.BadRequestError) as rejected:
        client.chat.completions.create(model="claude-chat", messages=MESSAGES)
    assert "messages.0: bad content" in rejected.value.message

    upstream.enqueue(Reply.error(529, "overloaded_error", "Overloaded"))
    with pytest.raises(openai.InternalServerError) as overloaded:
        client.chat.completions.create(model="claude-chat", messages=MESSAGES)
    assert overloaded.value.status_code == 503 and overloaded.value.code == "model_unavailable"

    events = events_for(message())
    upstream.enqueue(StreamReply(events=[*events[:2], error_event("overloaded_error", "Busy")]))
    with pytest.raises(openai.InternalServerError) as early:  # before any content: JSON 503
        client.chat.completions.create(model="claude-chat", messages=MESSAGES, stream=True)
    assert early.value.status_code == 503
    assert early.value.response.headers["content-type"].startswith("application/json")

    before = len(upstream.requests)
    with pytest.raises(openai.BadRequestError) as n_choices:  # rejected without a call
        client.chat.completions.create(model="claude-chat", messages=MESSAGES, n=2)
    assert "n must be 1" in n_choices.value.message
    assert len(upstream.requests) == before

    upstream.enqueue(Reply.error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(openai.APIStatusError) as auth:
        client.chat.completions.create(model="claude-chat", messages=MESSAGES)
    assert auth.value.status_code == 502 and "invalid x-api-key" not in auth.value.message


def test_an_error_event_mid_stream_ends_the_stream(
    client: openai.OpenAI, upstream: FakeAnthropic
) -> None:
    events = events_for(message())
    upstream.enqueue(StreamReply(events=[*events[:5], error_event("api_error", "Internal")]))
    stream = client.chat.completions.create(model="claude-chat", messages=MESSAGES, stream=True)
    content = ""
    with pytest.raises(openai.APIError):
        for chunk in stream:
            content += "".join(c.delta.content or "" for c in chunk.choices)
    assert content == "Hello from"
