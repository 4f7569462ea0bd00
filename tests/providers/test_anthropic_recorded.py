"""The Anthropic adapter against traffic recorded from the real Messages API
(`tests/fakes/recorded/`): what the next turn needs comes back, and goes out again as
Anthropic accepted it; no-argument tool calls; a stream cut after its thinking; error bodies."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from providers.anthropic import Options, create
from providers.base import ChatProvider, ChatStream, Usage
from providers.errors import ProviderError, UpstreamRejectedRequest
from tests.fakes.anthropic_upstream import FakeAnthropic, Reply, StreamReply
from tests.fakes.recorded import anthropic_frames, load, sse_events
from tests.providers.adapter_checks import run

TOOL_LOOP = load("anthropic_tool_loop_thinking")
THINKING_STREAM = load("anthropic_thinking_stream")
REDACTED = load("anthropic_redacted_thinking")
NO_ARGS = load("anthropic_tool_no_args")
REJECTED = load("anthropic_error_400")

COUNTRY_TOOL = {
    "type": "function",
    "function": {
        "name": "get_user_country",
        "description": "",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}
QUESTION = {"role": "user", "content": "What is the largest city in the user country?"}
TURN_ONE: dict[str, Any] = {
    "model": "claude-sonnet-4-0",
    "messages": [QUESTION],
    "tools": [COUNTRY_TOOL],
    "reasoning_effort": "medium",
    "max_completion_tokens": 4096,
}


@asynccontextmanager
async def anthropic(**options: Any) -> AsyncIterator[tuple[FakeAnthropic, ChatProvider]]:
    async with FakeAnthropic() as fake:
        provider = create("claude", Options(base_url=fake.base_url, **options))
        try:
            yield fake, provider
        finally:
            await provider.close()


async def collect(stream: ChatStream) -> list[dict[str, Any]]:
    try:
        return [chunk async for chunk in stream]
    finally:
        await stream.aclose()


def assembled(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message a client makes of the chunks: text and reasoning joined, tool
    call fragments joined by index, `thinking_blocks` lists concatenated."""
    message: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_content": ""}
    calls: dict[int, dict[str, Any]] = {}
    blocks: list[dict[str, Any]] = []
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            message["content"] += delta.get("content") or ""
            message["reasoning_content"] += delta.get("reasoning_content") or ""
            blocks += delta.get("thinking_blocks") or ()
            for call in delta.get("tool_calls") or ():
                into = calls.setdefault(
                    call["index"], {"type": "function", "function": {"arguments": ""}}
                )
                if "id" in call:
                    into["id"] = call["id"]
                function = call.get("function") or {}
                if "name" in function:
                    into["function"]["name"] = function["name"]
                into["function"]["arguments"] += function.get("arguments") or ""
    if blocks:
        message["thinking_blocks"] = blocks
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    return message


def recorded_signature(events: list[bytes]) -> str:
    """The signature a recorded stream sent in its `signature_delta` events."""
    signature = ""
    for event in events:
        data = json.loads(event.partition(b"data: ")[2])
        if (data.get("delta") or {}).get("type") == "signature_delta":
            signature += data["delta"]["signature"]
    assert signature
    return signature


def anthropic_refusal(request: dict[str, Any]) -> str | None:
    """What the Messages API answers 400 for, of its rules on thinking (None: accepted)."""
    if "thinking" not in request:
        return None
    if (request.get("tool_choice") or {}).get("type") in ("any", "tool"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    if request.get("temperature", 1) != 1:
        return "temperature may only be set to 1 when thinking is enabled"
    turns = request["messages"]
    # The assistant turn being continued begins after the last user turn that is not only
    # tool results; its first assistant message must start with the thinking.
    said = [
        i
        for i, turn in enumerate(turns)
        if turn["role"] == "user" and any(b["type"] != "tool_result" for b in turn["content"])
    ]
    current = [turn for turn in turns[said[-1] + 1 :] if turn["role"] == "assistant"]
    if current:
        first = current[0]["content"][0]
        if first["type"] not in ("thinking", "redacted_thinking"):
            return f"Expected `thinking` or `redacted_thinking`, but found `{first['type']}`."
    for turn in turns:
        for block in turn["content"]:
            if block["type"] == "thinking" and not block.get("signature"):
                return "thinking blocks need their signature"
    return None


def test_a_tool_loop_with_reasoning_round_trips_the_signed_thinking() -> None:
    first, second = TOOL_LOOP["exchanges"]

    async def test() -> None:
        async with anthropic() as (fake, provider):
            fake.enqueue(Reply(message=first["body"]))
            fake.enqueue(Reply(message=second["body"]))
            answer = (await provider.complete(TURN_ONE)).body["choices"][0]
            assert answer["finish_reason"] == "tool_calls"
            message = answer["message"]
            (recorded_thinking, recorded_text, recorded_call) = first["body"]["content"]
            assert message["reasoning_content"] == recorded_thinking["thinking"]
            assert message["thinking_blocks"] == [
                {
                    "type": "thinking",
                    "thinking": recorded_thinking["thinking"],
                    "signature": recorded_thinking["signature"],
                }
            ]
            assert message["content"] == recorded_text["text"]
            (call,) = message["tool_calls"]
            assert call["id"] == recorded_call["id"]
            assert call["function"] == {"name": "get_user_country", "arguments": "{}"}

            # The client sends the assistant message back as it came, with the tool's result.
            tool_result = {"role": "tool", "tool_call_id": call["id"], "content": "Mexico"}
            turn_two = {**TURN_ONE, "messages": [QUESTION, message, tool_result]}
            final = (await provider.complete(turn_two)).body["choices"][0]["message"]
            assert final["content"] == second["body"]["content"][0]["text"]

            sent = fake.requests[1].json
            assert anthropic_refusal(sent) is None
            # The assistant turn goes back exactly as Anthropic received it in the recording.
            assert sent["messages"][1] == second["request"]["messages"][1]
            recorded_result = dict(second["request"]["messages"][2]["content"][0])
            recorded_result.pop("is_error")
            assert sent["messages"][2] == {"role": "user", "content": [recorded_result]}
            assert sent["thinking"] == {"type": "enabled", "budget_tokens": 4095}

    run(test)


def test_a_client_that_drops_the_blocks_still_sends_a_valid_request() -> None:
    first, second = TOOL_LOOP["exchanges"]

    async def test() -> None:
        async with anthropic() as (fake, provider):
            fake.enqueue(Reply(message=first["body"]))
            fake.enqueue(Reply(message=second["body"]))
            message = (await provider.complete(TURN_ONE)).body["choices"][0]["message"]
            kept_only_openai = {k: v for k, v in message.items() if k != "thinking_blocks"}
            tool_result = {
                "role": "tool",
                "tool_call_id": message["tool_calls"][0]["id"],
                "content": "Mexico",
            }
            turn_two = {**TURN_ONE, "messages": [QUESTION, kept_only_openai, tool_result]}
            await provider.complete(turn_two)
            sent = fake.requests[1].json
            # This step goes without thinking, which Anthropic allows inside a tool loop.
            assert "thinking" not in sent
            assert anthropic_refusal(sent) is None
            assert [b["type"] for b in sent["messages"][1]["content"]] == ["text", "tool_use"]

    run(test)


def test_later_steps_of_a_tool_loop_keep_thinking_on() -> None:
    first, _ = TOOL_LOOP["exchanges"]

    async def test() -> None:
        async with anthropic() as (fake, provider):
            fake.enqueue(Reply(message=first["body"]))
            message = (await provider.complete(TURN_ONE)).body["choices"][0]["message"]
            call_id = message["tool_calls"][0]["id"]
            # Claude does not think again between tool results: the next step's message
            # calls a tool straight away.
            step_two = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "toolu_step_two",
                        "type": "function",
                        "function": {"name": "get_user_country", "arguments": "{}"},
                    }
                ],
            }
            messages = [
                QUESTION,
                message,
                {"role": "tool", "tool_call_id": call_id, "content": "Mexico"},
                step_two,
                {"role": "tool", "tool_call_id": "toolu_step_two", "content": "Mexico"},
            ]
            fake.enqueue(Reply())
            await provider.complete({**TURN_ONE, "messages": messages})
            sent = fake.requests[1].json
            assert "thinking" in sent and anthropic_refusal(sent) is None
            assert sent["messages"][1]["content"][0]["type"] == "thinking"
            assert sent["messages"][3]["content"][0]["type"] == "tool_use"

    run(test)


def test_redacted_thinking_comes_back_and_goes_out_again() -> None:
    first, second = REDACTED["exchanges"]

    async def test() -> None:
        async with anthropic() as (fake, provider):
            fake.enqueue(Reply(message=first["body"]))
            fake.enqueue(Reply(message=second["body"]))
            body = {
                "model": first["request"]["model"],
                "messages": [
                    {"role": "user", "content": first["request"]["messages"][0]["content"]}
                ],
                "reasoning_effort": "minimal",
                "max_completion_tokens": 4096,
            }
            message = (await provider.complete(body)).body["choices"][0]["message"]
            (redacted, _) = first["body"]["content"]
            assert message["thinking_blocks"] == [
                {"type": "redacted_thinking", "data": redacted["data"]}
            ]
            assert "reasoning_content" not in message  # nothing readable came
            follow_up = {"role": "user", "content": "What was that?"}
            await provider.complete({**body, "messages": [*body["messages"], message, follow_up]})
            sent = fake.requests[1].json
            assert sent["messages"][1] == second["request"]["messages"][1]
            assert anthropic_refusal(sent) is None

    run(test)


def test_a_streamed_thinking_block_comes_whole_with_its_signature() -> None:
    (exchange,) = THINKING_STREAM["exchanges"]
    events = sse_events(exchange["sse"])
    body = {
        "model": "claude-sonnet-4-0",
        "messages": [{"role": "user", "content": "How do I cross the street?"}],
        "reasoning_effort": "minimal",
        "max_completion_tokens": 4096,
        "stream": True,
    }

    async def test() -> None:
        async with anthropic() as (fake, provider):
            fake.enqueue(StreamReply(events=events))
            chunks = await collect(await provider.stream(body))
            message = assembled(chunks)
            (block,) = message["thinking_blocks"]
            assert block["type"] == "thinking"
            assert block["thinking"] == message["reasoning_content"]
            assert block["signature"] == recorded_signature(events)
            # Sent back, the block is the assistant turn's first, signature and all.
            message.pop("reasoning_content")
            follow_up = {"role": "user", "content": "And at night?"}
            next_turn = {**body, "messages": [*body["messages"], message, follow_up]}
            fake.enqueue(Reply())
            await provider.complete({**next_turn, "stream": False})
            assistant = fake.requests[1].json["messages"][1]
            assert assistant["content"][0] == block
            assert anthropic_refusal(fake.requests[1].json) is None

    run(test)


def test_a_tool_call_without_arguments_is_valid_json_in_both_shapes() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": "Update the issue list."}],
        "tools": [{"type": "function", "function": {"name": "updateIssueList"}}],
        "max_completion_tokens": 1024,
    }

    async def test() -> None:
        async with anthropic() as (fake, provider):
            fake.enqueue(Reply(message=NO_ARGS["message"]))
            fake.enqueue(StreamReply(events=anthropic_frames(NO_ARGS["events"])))
            whole = (await provider.complete(body)).body["choices"][0]["message"]
            assert whole["tool_calls"][0]["function"]["arguments"] == "{}"
            chunks = await collect(await provider.stream({**body, "stream": True}))
            (call,) = assembled(chunks)["tool_calls"]
            assert call["id"] == "toolu_01QE1WLsSVp5hy5Q3GmGTmjP"
            assert call["function"] == {"name": "updateIssueList", "arguments": "{}"}
            finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
            assert finish[-1] == "tool_calls"

    run(test)


def test_a_stream_cut_after_its_thinking_reports_what_anthropic_counted() -> None:
    (exchange,) = THINKING_STREAM["exchanges"]
    events = sse_events(exchange["sse"])
    stop = next(i for i, e in enumerate(events) if e.startswith(b"event: content_block_stop"))
    body = {
        "model": "claude-sonnet-4-0",
        "messages": [{"role": "user", "content": "How do I cross the street?"}],
        "reasoning_effort": "minimal",
        "max_completion_tokens": 4096,
        "stream": True,
    }

    async def test() -> None:
        async with anthropic() as (fake, provider):
            fake.enqueue(StreamReply(events=events, break_after=stop + 1))
            stream = await provider.stream(body)
            received: list[dict[str, Any]] = []
            with pytest.raises(ProviderError):
                async for chunk in stream:
                    received.append(chunk)
            await stream.aclose()
            message = assembled(received)
            thinking = message["reasoning_content"]
            assert thinking and message["content"] == ""  # cut before the answer's text
            assert message["thinking_blocks"][0]["thinking"] == thinking
            # message_start reported 43 input tokens and 1 output token, as the usage says
            # (the thinking delivered since is counted by the gateway: gateway.chat.usage).
            assert stream.usage == Usage(
                prompt_tokens=43, completion_tokens=1, total_tokens=44, partial=True
            )

    run(test)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"tool_choice": "required"}, "tool_choice"),
        (
            {"tool_choice": {"type": "function", "function": {"name": "get_user_country"}}},
            "tool_choice",
        ),
        ({"temperature": 0.2}, "temperature"),
        ({"top_p": 0.5}, "top_p"),
    ],
)
def test_what_anthropic_forbids_beside_thinking_is_refused_naming_the_field(
    change: dict[str, Any], field: str
) -> None:
    async def test() -> None:
        async with anthropic() as (fake, provider):
            with pytest.raises(UpstreamRejectedRequest) as refused:
                await provider.complete({**TURN_ONE, **change})
            assert refused.value.message.startswith(f"{field}: Anthropic extended thinking")
            assert not refused.value.retryable
            assert fake.requests == []  # refused here, not by a 400 from Anthropic
            await provider.complete({**TURN_ONE, **change, "reasoning_effort": "none"})
            assert "thinking" not in fake.requests[0].json

    run(test)


def test_temperature_one_is_what_thinking_runs_at() -> None:
    async def test() -> None:
        async with anthropic() as (fake, provider):
            fake.enqueue(Reply(message=TOOL_LOOP["exchanges"][0]["body"]))
            await provider.complete({**TURN_ONE, "temperature": 1, "tool_choice": "auto"})
            sent = fake.requests[0].json
            assert sent["temperature"] == 1 and sent["tool_choice"] == {"type": "auto"}
            assert anthropic_refusal(sent) is None

    run(test)


def test_an_error_body_keeps_its_message_and_is_not_retryable() -> None:
    async def test() -> None:
        async with anthropic() as (fake, provider):
            fake.enqueue(
                Reply(
                    status=REJECTED["exchanges"][0]["status"], body=REJECTED["exchanges"][0]["body"]
                )
            )
            with pytest.raises(UpstreamRejectedRequest) as rejected:
                await provider.complete(TURN_ONE)
            expected = REJECTED["exchanges"][0]["body"]["error"]["message"]
            assert rejected.value.message == expected
            assert rejected.value.upstream_status == 400 and not rejected.value.retryable

    run(test)


def test_prompt_caching_marks_the_system_prompt_and_the_tools() -> None:
    first = copy.deepcopy(TOOL_LOOP["exchanges"][0]["body"])
    body = {**TURN_ONE, "messages": [{"role": "system", "content": "Be precise."}, QUESTION]}
    tools = [COUNTRY_TOOL, {"type": "function", "function": {"name": "lookup"}}]

    async def test() -> None:
        options = {"cache_control": {"claude-sonnet-4-0": "1h", "*": "5m"}}
        async with anthropic(**options) as (fake, provider):
            fake.enqueue(Reply(message=first))
            fake.enqueue(Reply(message=first))
            await provider.complete({**body, "tools": tools})
            sent = fake.requests[0].json
            one_hour = {"type": "ephemeral", "ttl": "1h"}
            assert sent["system"] == [
                {"type": "text", "text": "Be precise.", "cache_control": one_hour}
            ]
            assert "cache_control" not in sent["tools"][0]
            assert sent["tools"][1]["cache_control"] == one_hour
            await provider.complete({**body, "model": "claude-haiku-4-5"})
            other = fake.requests[1].json
            assert other["system"][0]["cache_control"] == {"type": "ephemeral"}
            assert other["tools"][0]["cache_control"] == {"type": "ephemeral"}
        async with anthropic() as (fake, provider):  # not opted in: nothing marked
            fake.enqueue(Reply(message=first))
            await provider.complete({**body, "tools": tools})
            sent = fake.requests[0].json
            assert sent["system"] == "Be precise."
            assert all("cache_control" not in tool for tool in sent["tools"])

    run(test)
