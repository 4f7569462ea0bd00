"""Recorded real exchanges with Anthropic's API (pydantic-ai's cassettes, `tests/fakes/recorded`,
each naming its source) replayed through the Messages API of a running gateway with the
official `anthropic` SDK: the requests reach the upstream exactly as recorded, signed and
redacted thinking go back as they came (the fake upstream checks them as Anthropic does), and
recorded cache usage is charged at each rate."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from decimal import Decimal

import anthropic
import pytest

from tests.e2e.messages_support import (
    HELLO,
    anthropic_client,
    last_charge,
    messages_gateway,
    strict_upstream,
    without_stream,
)
from tests.fakes.anthropic_upstream import FakeAnthropic, Reply, StreamReply
from tests.fakes.recorded import load
from tests.support.gateway_process import GatewayProcess


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


def test_extended_thinking_over_two_recorded_turns(
    client: anthropic.Anthropic, upstream: FakeAnthropic
) -> None:
    """pydantic-ai's recording of a real tool loop with thinking: the first answer's signed
    thinking goes back in the second request, which the fake accepts only with the signature
    it issued for that exact text (as Anthropic checks)."""
    first, second = load("anthropic_tool_loop_thinking")["exchanges"]
    upstream.enqueue(Reply(message=first["body"]))
    recorded = without_stream(first["request"])
    request = {**recorded, "model": "claude-chat"}
    answer = client.messages.create(**request)
    assert [block.model_dump(exclude_none=True) for block in answer.content] == first["body"][
        "content"
    ]
    assert upstream.requests[-1].json == recorded
    # The client sends the answer back as it came, with its tool's result.
    tool = answer.content[-1]
    assert tool.type == "tool_use"
    turns = [
        *request["messages"],
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tool.id,
                    "content": "Mexico",
                    "is_error": False,
                }
            ],
        },
    ]
    recorded_second = without_stream(second["request"])
    assert turns == recorded_second["messages"]
    upstream.enqueue(Reply(message=second["body"]))
    final = client.messages.create(**{**request, "messages": turns})
    assert upstream.requests[-1].json == recorded_second
    assert final.content[-1].type == "text" and "Mexico City" in final.content[-1].text

    # The same turn with the thinking altered is refused by the upstream, and so by the gateway.
    tampered = copy.deepcopy(turns)
    tampered[1]["content"][0]["thinking"] += " (edited)"
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(**{**request, "messages": tampered})
    assert "Invalid `signature` in `thinking` block" in refused.value.message
    assert refused.value.error_code == "invalid_request"
    # Thinking dropped from a continued tool turn is refused as Anthropic refuses it.
    dropped = copy.deepcopy(turns)
    dropped[1]["content"] = dropped[1]["content"][1:]
    with pytest.raises(anthropic.BadRequestError) as unthought:
        client.messages.create(**{**request, "messages": dropped})
    assert "must start with a thinking block" in unthought.value.message


def test_a_streamed_thinking_answer_keeps_its_signature(
    client: anthropic.Anthropic, upstream: FakeAnthropic
) -> None:
    """pydantic-ai's recording of a real thinking stream, replayed: the SDK's accumulated
    message has the thinking and its signature as Anthropic sent them."""
    (exchange,) = load("anthropic_thinking_stream")["exchanges"]
    events = [
        json.loads(line[len("data: ") :])
        for line in exchange["sse"].splitlines()
        if line.startswith("data: ")
    ]
    upstream.enqueue(StreamReply(events=events))
    recorded = without_stream(exchange["request"])
    with client.messages.stream(**{**recorded, "model": "claude-chat"}) as stream:
        final = stream.get_final_message()
    block = final.content[0]
    assert block.type == "thinking" and block.signature and len(block.signature) > 100
    signed = [e for e in events if (e.get("delta") or {}).get("type") == "signature_delta"]
    assert block.signature == signed[0]["delta"]["signature"]
    assert upstream.requests[-1].json == {**recorded, "model": "claude-sonnet-4-0", "stream": True}


def test_redacted_thinking_goes_back_as_it_came(
    client: anthropic.Anthropic, upstream: FakeAnthropic
) -> None:
    """pydantic-ai's recording of a real answer with redacted thinking, then the request that
    sent it back: the encrypted block reaches the upstream unchanged (the fake checks it
    issued that data) and the second request is the recorded one."""
    first, second = load("anthropic_redacted_thinking")["exchanges"]
    upstream.enqueue(Reply(message=first["body"]), Reply(message=second["body"]))
    recorded = without_stream(first["request"])
    answer = client.messages.create(**{**recorded, "model": "claude-chat"})
    redacted = answer.content[0]
    assert redacted.type == "redacted_thinking"
    assert redacted.data == first["body"]["content"][0]["data"]
    follow_up = without_stream(second["request"])
    assert follow_up["messages"][1]["content"][0] == redacted.model_dump()
    client.messages.create(**{**follow_up, "model": "claude-chat"})
    assert upstream.requests[-1].json == {**follow_up, "model": "claude-sonnet-4-0"}


def test_recorded_cache_reads_and_writes_are_charged_exactly(
    client: anthropic.Anthropic, upstream: FakeAnthropic, gateway: GatewayProcess
) -> None:
    """pydantic-ai's recording of a real answer that read 1111 tokens from the prompt cache and
    wrote 418: each is priced at its own rate."""
    _, answer = load("anthropic_cache_usage")["answers"]
    upstream.enqueue(Reply(message=answer["body"]))
    got = client.messages.create(model="claude-chat", max_tokens=100, messages=HELLO)
    usage = got.usage
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (1111, 418)
    assert (
        usage.cache_creation is not None and usage.cache_creation.ephemeral_5m_input_tokens == 418
    )
    # (3 x 3 + 1111 x 0.3 + 418 x 3.75 + 33 x 15) / 1e6 USD x 1000 credits per USD
    assert (usage.model_extra or {})["credits"] == "2.4048"
    assert last_charge(gateway) == Decimal("2.4048")
