"""Anthropic's stream framing: chat.completion.chunks made into Anthropic's events that the
official SDK accumulates into the right message, native events passed on with the credits in
the last `message_delta`, and a broken stream's `error` event in Anthropic's shape."""

from __future__ import annotations

import json
from typing import Any

from anthropic._models import construct_type_unchecked
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent

from gateway.errors import ModelUnavailable
from gateway.http.anthropic.events import MessageEventFramer, NativeEventFramer
from providers.base import Usage

USAGE_CHUNK = {
    "id": "chatcmpl_1",
    "model": "m",
    "choices": [],
    "usage": {
        "prompt_tokens": 130,
        "completion_tokens": 30,
        "prompt_tokens_details": {"cached_tokens": 100, "cache_creation_tokens": 20},
        "credits": "0.5850",
        "credits_usd_reference": "0.0006",
    },
}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl_1", "model": "m", "choices": [choice]}


def _events(frames: bytes) -> list[dict[str, Any]]:
    """The events of SSE bytes, checking each `event:` line names its data's type."""
    events = []
    for block in frames.decode().split("\n\n"):
        if not block:
            continue
        name, data = block.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert name == f"event: {event['type']}"
        events.append(event)
    return events


def _accumulate(events: list[dict[str, Any]]) -> Message:
    snapshot = None
    partial_json: dict[int, bytes] = {}
    for event in events:
        typed = construct_type_unchecked(type_=RawMessageStreamEvent, value=event)  # type: ignore[arg-type]
        snapshot = accumulate_event(event=typed, current_snapshot=snapshot, json_bufs=partial_json)  # type: ignore[arg-type]
    assert snapshot is not None
    return snapshot


def test_chunks_become_blocks_that_the_sdk_accumulates() -> None:
    framer = MessageEventFramer()
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f"}}
    chunks = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"reasoning_content": "Think"}),
        _chunk({"reasoning_content": "ing."}),
        _chunk(
            {"thinking_blocks": [{"type": "thinking", "thinking": "Thinking.", "signature": "s1"}]}
        ),
        _chunk({"content": "Hello"}),
        _chunk({"content": " world."}),
        _chunk({"tool_calls": [{**call, "function": {"name": "f", "arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]}),
        _chunk({}, "tool_calls"),
    ]
    frames = b"".join(filter(None, (framer.chunk(c) for c in chunks))) + framer.end(USAGE_CHUNK)
    events = _events(frames)
    assert [e["type"] for e in events][:2] == ["message_start", "content_block_start"]
    assert [e["type"] for e in events][-2:] == ["message_delta", "message_stop"]
    message = _accumulate(events)
    assert [block.model_dump(exclude_none=True) for block in message.content] == [
        {"type": "thinking", "thinking": "Thinking.", "signature": "s1"},
        {"type": "text", "text": "Hello world."},
        {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}},
    ]
    assert message.stop_reason == "tool_use" and message.id == "chatcmpl_1"
    usage = message.usage
    assert (usage.input_tokens, usage.output_tokens) == (10, 30)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (100, 20)
    assert events[-2]["usage"]["credits"] == "0.5850"


def test_message_start_has_the_counts_the_upstream_reported_before_the_first_chunk() -> None:
    framer = MessageEventFramer()
    framer.opening_usage(Usage(prompt_tokens=130, cached_tokens=100, cache_creation_tokens=20))
    (start,) = _events(framer.chunk(_chunk({"role": "assistant", "content": ""})) or b"")
    assert start["message"]["usage"] == {
        "input_tokens": 10,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 100,
        "output_tokens": 0,
    }
    unreported = MessageEventFramer()
    unreported.opening_usage(None)  # an upstream that reports counts only at the end
    (start,) = _events(unreported.chunk(_chunk({"content": ""})) or b"")
    assert start["message"]["usage"] == {"input_tokens": 0, "output_tokens": 0}


def test_a_stream_without_content_still_opens_and_closes() -> None:
    events = _events(MessageEventFramer().end(USAGE_CHUNK))
    assert [e["type"] for e in events] == ["message_start", "message_delta", "message_stop"]
    assert _accumulate(events).stop_reason == "end_turn"


def test_native_events_pass_with_the_credits_last() -> None:
    framer = NativeEventFramer(call_id="chatcmpl_9", model="claude-chat")
    start = {
        "type": "message_start",
        "message": {"id": "msg_up", "model": "claude-up", "content": [], "usage": {}},
    }
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 3},
    }
    sent = [
        framer.chunk(start),
        framer.chunk(block),
        framer.chunk(delta),
        framer.chunk({"type": "message_stop"}),
    ]
    assert sent[2] is None and sent[3] is None  # held until the call is settled
    first = _events(sent[0] or b"")[0]
    assert (first["message"]["id"], first["message"]["model"]) == ("chatcmpl_9", "claude-chat")
    assert _events(sent[1] or b"") == [block]
    last = _events(framer.end(USAGE_CHUNK))
    assert last[0]["usage"] == {
        "output_tokens": 3,
        "credits": "0.5850",
        "credits_usd_reference": "0.0006",
    }
    assert last[1] == {"type": "message_stop"}


def test_a_broken_stream_ends_with_anthropics_error_event() -> None:
    (event,) = _events(MessageEventFramer().error(ModelUnavailable(), "req_1"))
    assert event["type"] == "error" and event["request_id"] == "req_1"
    assert event["error"]["type"] == "overloaded_error"
    assert event["error"]["details"] == {"error_code": "model_unavailable", "retryable": True}
