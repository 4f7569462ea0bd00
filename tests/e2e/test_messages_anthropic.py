"""The Messages API (`/v1/messages`) in front of an Anthropic upstream, driven by the official
`anthropic` SDK against a running gateway: the request passes through untranslated, with the
client's version and beta headers; the answer and its stream come back as the upstream sent
them with the gateway's credits, charged exactly (a broken stream for what it produced); tools
round-trip; count_tokens asks the upstream; an idempotent replay is the same answer; errors
come back as the SDK's typed errors. Recorded exchanges: test_messages_recorded.py."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import anthropic
import httpx
import pytest
from anthropic._constants import ANTHROPIC_API_VERSION

from tests.e2e.messages_support import (
    HELLO,
    anthropic_client,
    last_charge,
    messages_gateway,
    root_of,
    strict_upstream,
)
from tests.fakes.anthropic_upstream import (
    FakeAnthropic,
    Reply,
    StreamReply,
    error_event,
    message,
    text,
    thinking,
    tool_use,
)
from tests.support.gateway_process import GatewayProcess
from tests.support.metrics_scrape import scrape, total

TOOL_ANSWER = message(
    thinking("The weather needs a tool."),
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
    yield from strict_upstream()


@pytest.fixture(scope="module")
def gateway(
    upstream: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    yield from messages_gateway(upstream, tmp_path_factory)


@pytest.fixture
def client(gateway: GatewayProcess, upstream: FakeAnthropic) -> Iterator[anthropic.Anthropic]:
    upstream.requests.clear()
    assert gateway.api_key
    with anthropic_client(gateway, gateway.api_key) as c:
        yield c


def test_a_message_passes_through_and_is_charged_exactly(
    client: anthropic.Anthropic, upstream: FakeAnthropic, gateway: GatewayProcess
) -> None:
    upstream.enqueue(
        Reply(
            message=message(
                text("Hi there."),
                input_tokens=12,
                output_tokens=6,
                cache_read=100,
                cache_creation=20,
            )
        )
    )
    system = [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    raw = client.messages.with_raw_response.create(
        model="claude-chat",
        max_tokens=300,
        system=system,  # type: ignore[arg-type]
        messages=HELLO,
        stop_sequences=["END", "STOP", "HALT", "QUIT", "DONE"],
        metadata={"user_id": "user-7"},
        cache_control={"type": "ephemeral"},
        extra_body={"top_k": 5, "context_management": {"edits": []}},
        extra_headers={"anthropic-beta": "context-management-2025-06-27"},
    )
    answer = raw.parse()
    sent = upstream.requests[-1]
    assert sent.path == "/v1/messages"
    assert sent.json == {
        "model": "claude-sonnet-4-0",
        "max_tokens": 300,
        "system": system,
        "messages": HELLO,
        "stop_sequences": ["END", "STOP", "HALT", "QUIT", "DONE"],
        "metadata": {"user_id": "user-7"},
        "cache_control": {"type": "ephemeral"},
        "top_k": 5,
        "context_management": {"edits": []},
    }
    assert sent.headers["x-api-key"] == "sk-ant-upstream-secret"  # the gateway's, not the client's
    assert sent.headers["anthropic-version"] == ANTHROPIC_API_VERSION
    assert sent.headers["anthropic-beta"] == "context-management-2025-06-27"
    assert answer.id.startswith("msg_") and answer.model == "claude-chat"
    assert [block.model_dump(exclude_none=True) for block in answer.content] == [text("Hi there.")]
    assert answer.stop_reason == "end_turn"
    usage = answer.usage
    assert (usage.input_tokens, usage.output_tokens) == (12, 6)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (100, 20)
    # (12 x 3 + 100 x 0.3 + 20 x 3.75 + 6 x 15) / 1e6 USD x 1000 credits per USD
    assert (usage.model_extra or {})["credits"] == "0.2310"
    assert last_charge(gateway) == Decimal("0.2310")
    assert raw.headers["request-id"] == raw.headers["x-request-id"]
    assert raw.headers["x-gateway-route"] == "pinned"


def test_a_stream_accumulates_in_the_sdk_with_the_credits_last(
    client: anthropic.Anthropic, upstream: FakeAnthropic, gateway: GatewayProcess
) -> None:
    upstream.enqueue(StreamReply(message=TOOL_ANSWER))
    credits = None
    with client.messages.stream(model="auto", max_tokens=2048, messages=HELLO) as stream:
        for event in stream:
            if event.type == "message_delta":
                credits = (event.usage.model_extra or {}).get("credits")
        final = stream.get_final_message()
    assert upstream.requests[-1].json["stream"] is True
    assert [block.model_dump(exclude_none=True) for block in final.content] == TOOL_ANSWER[
        "content"
    ]
    assert final.stop_reason == "tool_use" and final.model == "claude-chat"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (10, 30)
    # (10 x 3 + 100 x 0.3 + 20 x 3.75 + 30 x 15) / 1e6 x 1000
    assert credits == "0.5850"
    assert last_charge(gateway) == Decimal("0.5850")


def test_a_tool_round_trip(client: anthropic.Anthropic, upstream: FakeAnthropic) -> None:
    tools: list[anthropic.types.ToolParam] = [
        {
            "name": "get_weather",
            "description": "Weather of a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            "cache_control": {"type": "ephemeral"},
        }
    ]
    call = message(tool_use("toolu_9", "get_weather", {"city": "Oslo"}), stop_reason="tool_use")
    upstream.enqueue(Reply(message=call), Reply(message=message(text("It is 4C in Oslo."))))
    first = client.messages.create(
        model="claude-chat",
        max_tokens=200,
        messages=HELLO,
        tools=tools,
        tool_choice={"type": "any"},
    )
    (use,) = first.content
    assert use.type == "tool_use" and use.input == {"city": "Oslo"}
    history: list[anthropic.types.MessageParam] = [
        *HELLO,
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "4C"}],
        },
    ]
    second = client.messages.create(
        model="claude-chat", max_tokens=200, messages=history, tools=tools
    )
    assert second.content[0].type == "text"
    sent = upstream.requests[-1].json
    assert sent["tools"] == tools
    assert sent["messages"][1] == {"role": "assistant", "content": [call["content"][0]]}
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "4C"}
    ]


def test_count_tokens_asks_the_upstream(
    client: anthropic.Anthropic, upstream: FakeAnthropic
) -> None:
    counted = client.messages.count_tokens(model="claude-chat", messages=HELLO, system="Be brief.")
    assert counted.input_tokens == upstream.count_tokens
    sent = upstream.requests[-1]
    assert sent.path == "/v1/messages/count_tokens"
    assert sent.json == {"model": "claude-sonnet-4-0", "messages": HELLO, "system": "Be brief."}
    assert sent.headers["anthropic-version"] == ANTHROPIC_API_VERSION


def test_an_idempotent_replay_is_the_same_answer_charged_once(
    client: anthropic.Anthropic, upstream: FakeAnthropic, gateway: GatewayProcess
) -> None:
    upstream.enqueue(StreamReply(message=message(text("Once only."))))
    key = {"Idempotency-Key": "messages-replay-1"}
    bodies = []
    for _ in range(2):
        with client.messages.with_streaming_response.create(
            model="claude-chat", max_tokens=100, messages=HELLO, stream=True, extra_headers=key
        ) as response:
            bodies.append((response.headers.get("idempotent-replayed"), response.read()))
    assert bodies[0][0] is None and bodies[1][0] == "true"
    assert bodies[0][1] == bodies[1][1]
    assert b"event: message_stop" in bodies[1][1]
    assert len(upstream.requests) == 1
    # Another body under the same key is refused.
    with pytest.raises(anthropic.UnprocessableEntityError) as reused:
        client.messages.create(
            model="claude-chat", max_tokens=99, messages=HELLO, extra_headers=key
        )
    assert reused.value.error_code == "idempotency_key_reused"


def test_errors_are_the_sdks_typed_errors(
    client: anthropic.Anthropic, upstream: FakeAnthropic, gateway: GatewayProcess
) -> None:
    with (
        anthropic_client(gateway, "sk-wrong") as wrong,
        pytest.raises(anthropic.AuthenticationError) as unknown,
    ):
        wrong.messages.create(model="auto", max_tokens=10, messages=HELLO)
    assert unknown.value.error_code == "invalid_api_key"
    assert "x-api-key" in unknown.value.message
    assert unknown.value.request_id and unknown.value.request_id.startswith("req_")
    assert unknown.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]

    with (
        anthropic_client(gateway, gateway.new_key("broke")) as broke,
        pytest.raises(anthropic.PaymentRequiredError) as poor,
    ):
        broke.messages.create(model="auto", max_tokens=10, messages=HELLO)
    assert poor.value.error_code == "insufficient_credits"
    assert poor.value.body["error"]["type"] == "billing_error"  # type: ignore[index]

    gateway.grant("limited", "10")
    with anthropic_client(gateway, gateway.new_key("limited")) as limited:
        limited.messages.create(model="auto", max_tokens=10, messages=HELLO)  # the minute's one
        with pytest.raises(anthropic.RateLimitError) as throttled:
            limited.messages.create(model="auto", max_tokens=10, messages=HELLO)
    assert int(throttled.value.response.headers["retry-after"]) >= 1
    assert throttled.value.error_code == "rate_limited"

    upstream.enqueue(Reply.error(529, "overloaded_error", "Overloaded"))
    with pytest.raises(anthropic.OverloadedError) as overloaded:
        client.messages.create(model="claude-chat", max_tokens=10, messages=HELLO)
    assert overloaded.value.status_code == 529
    assert overloaded.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    assert overloaded.value.error_code == "model_unavailable"
    # Overloaded right after message_start, as Anthropic streams it: the same, before any byte.
    start = {"type": "message_start", "message": message()}
    upstream.enqueue(StreamReply(events=[start, error_event("overloaded_error", "Overloaded")]))
    with (
        pytest.raises(anthropic.OverloadedError),
        client.messages.stream(model="claude-chat", max_tokens=10, messages=HELLO) as stream,
    ):
        stream.get_final_message()


def test_either_way_of_sending_the_key(gateway: GatewayProcess, upstream: FakeAnthropic) -> None:
    root, key = root_of(gateway), gateway.api_key
    with anthropic.Anthropic(base_url=root, auth_token=key, api_key=None, max_retries=0) as bearer:
        assert bearer.messages.create(model="auto", max_tokens=10, messages=HELLO).content
    with httpx.Client(base_url=root) as http:
        body: dict[str, Any] = {"model": "auto", "max_tokens": 10, "messages": HELLO}
        both = http.post(
            "/v1/messages",
            json=body,
            headers={"x-api-key": str(key), "Authorization": "Bearer sk-other"},
        )
        assert both.status_code == 401, both.text
        assert both.json()["error"]["details"]["error_code"] == "invalid_api_key"
        missing = http.post("/v1/messages", json=body)
        assert missing.status_code == 401
        assert "x-api-key" in missing.json()["error"]["message"]
        assert missing.headers["request-id"] == missing.headers["x-request-id"]


def test_requests_are_counted_by_dialect(
    client: anthropic.Anthropic, gateway: GatewayProcess
) -> None:
    client.messages.create(model="auto", max_tokens=10, messages=HELLO)
    _, samples = scrape(gateway)
    assert (
        total(
            samples,
            "gateway_dialect_requests_total",
            dialect="anthropic",
            route="/v1/messages",
            status="200",
        )
        >= 1
    )
    lines = gateway.log_records()
    assert any(
        line.get("event") == "request" and line.get("dialect") == "anthropic" for line in lines
    )


def test_a_stream_broken_upstream_ends_with_an_error_event_charged_for_what_came(
    client: anthropic.Anthropic, upstream: FakeAnthropic, gateway: GatewayProcess
) -> None:
    whole = message(text("one two three four five six"), input_tokens=50, output_tokens=6)
    upstream.enqueue(StreamReply(message=whole, break_after=6))  # after the first deltas
    texts: list[str] = []
    with (
        pytest.raises(anthropic.APIStatusError) as broken,
        client.messages.stream(model="claude-chat", max_tokens=100, messages=HELLO) as stream,
    ):
        for piece in stream.text_stream:
            texts.append(piece)
    assert texts and "".join(texts) != "one two three four five six"
    assert broken.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert broken.value.body["error"]["details"]["error_code"] == "upstream_error"  # type: ignore[index]
    # Charged for the prompt Anthropic reported and the output delivered, however it ended.
    assert last_charge(gateway) >= Decimal(50 * 3 + 15) / 1000


def test_the_sdks_beta_messages_are_served_too(
    client: anthropic.Anthropic, upstream: FakeAnthropic
) -> None:
    """`client.beta.messages` (what Claude Code uses) posts to `/v1/messages?beta=true` with its
    betas in `anthropic-beta`."""
    answer = client.beta.messages.create(
        model="claude-chat",
        max_tokens=20,
        messages=HELLO,
        betas=["interleaved-thinking-2025-05-14", "context-management-2025-06-27"],
    )
    assert answer.content[0].type == "text"
    sent = upstream.requests[-1]
    assert sent.headers["anthropic-beta"] == (
        "interleaved-thinking-2025-05-14,context-management-2025-06-27"
    )


CLAUDE_CODE_TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Fix the bug."},
    {"role": "assistant", "content": [text("Looking.")]},
    {"role": "system", "content": "The user changed a.py; re-read it before editing."},
    {
        "role": "user",
        "content": [
            {"type": "document", "source": {"type": "file", "file_id": "file_011CNha8i"}},
        ],
    },
    {"role": "assistant", "content": [text("Read it.")]},
    {"role": "user", "content": [{"type": "future_block_20270101", "payload": {"x": 1}}]},
]


def test_what_anthropic_takes_today_passes_through_as_written(
    client: anthropic.Anthropic, upstream: FakeAnthropic
) -> None:
    """A mid-conversation system message, a turn of one document, a block type this gateway
    does not know, fields it does not know, and nulls: forwarded as the client wrote them."""
    extra = {
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "speed": None,
        "diagnostics": {"level": "basic"},
    }
    raw = client.beta.messages.with_raw_response.create(
        model="claude-chat",
        max_tokens=50,
        messages=CLAUDE_CODE_TURNS,  # type: ignore[arg-type]
        extra_body=extra,
    )
    assert raw.http_response.status_code == 200
    assert raw.parse().id.startswith("msg_")
    assert "x-gateway-dropped-fields" not in raw.http_response.headers
    sent = upstream.requests[-1].json
    assert sent == {
        "model": "claude-sonnet-4-0",
        "max_tokens": 50,
        "messages": CLAUDE_CODE_TURNS,
        **extra,
    }
