"""Chat.completion.chunks framed as the Responses API's events: each item added before its
deltas and done after them with the whole item, one terminal event with the id and the usage,
sequence numbers without a gap; and the sync answer built from a chat.completion."""

from __future__ import annotations

import json
from typing import Any

from gateway.errors import RateLimited, UpstreamFailed
from gateway.http.openai_responses.answer import response_of, signed_thinking
from gateway.http.openai_responses.events import ResponseEventFramer
from gateway.http.openai_responses.request import ToolNames
from tests.support.responses_events import check_event_order, read_events

NAMES = ToolNames(custom=frozenset({"apply_patch"}))
ECHO = {"tools": [], "tool_choice": "auto", "parallel_tool_calls": True}
USAGE = {
    "id": "chatcmpl_ab12",
    "usage": {
        "prompt_tokens": 20,
        "completion_tokens": 7,
        "total_tokens": 27,
        "prompt_tokens_details": {"cached_tokens": 5},
        "completion_tokens_details": {"reasoning_tokens": 3},
        "credits": "0.0100",
        "credits_usd_reference": "0.0001",
    },
}


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl_ab12", "model": "m-1", "created": 7, "choices": [choice]}


def call(index: int, arguments: str, name: str = "", ident: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if name:
        out["id"], out["function"]["name"] = ident, name
    return {"tool_calls": [out]}


def frame(chunks: list[dict[str, Any]], *, broken: bool = False) -> list[dict[str, Any]]:
    framer = ResponseEventFramer(ECHO, NAMES)
    raw = b"".join(framer.chunk(c) or b"" for c in chunks)
    raw += framer.error(UpstreamFailed("gone"), "req_1") if broken else framer.end(USAGE)
    return read_events(raw.decode())


def test_reasoning_text_and_tool_calls_in_order() -> None:
    events = frame(
        [
            chunk({"role": "assistant", "reasoning_content": "Think"}),
            chunk({"reasoning_content": "ing."}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo"}),
            chunk(call(0, '{"ci', "get_weather", "call_1")),
            chunk(call(0, 'ty":"Oslo"}')),
            chunk(call(1, '{"input":"*** Begin', "apply_patch", "call_2")),
            chunk(call(1, ' Patch"}'), finish="tool_calls"),
        ]
    )
    final = check_event_order(events)
    assert final["status"] == "completed" and final["id"] == "resp_ab12"
    reasoning, message, function, custom = final["output"]
    assert reasoning["type"] == "reasoning"
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "Thinking."}]
    assert message["content"][0]["text"] == "Hello"
    assert function == {
        "id": function["id"],
        "type": "function_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    }
    assert custom["type"] == "custom_tool_call" and custom["input"] == "*** Begin Patch"
    kinds = [e["type"] for e in events]
    assert kinds.count("response.output_text.delta") == 2
    assert kinds.count("response.function_call_arguments.delta") == 2
    assert "response.custom_tool_call_input.done" in kinds
    assert final["usage"] == {
        "input_tokens": 20,
        "input_tokens_details": {"cached_tokens": 5, "cache_write_tokens": 0},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 3},
        "total_tokens": 27,
        "credits": "0.0100",
        "credits_usd_reference": "0.0001",
    }


def test_a_stream_cut_by_the_token_limit_is_incomplete() -> None:
    events = frame([chunk({"content": "Hello"}), chunk({}, finish="length")])
    final = check_event_order(events)
    assert events[-1]["type"] == "response.incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["output"][0]["status"] == "incomplete"


def test_a_broken_stream_ends_in_response_failed() -> None:
    events = frame([chunk({"content": "Hel"})], broken=True)
    final = check_event_order(events)
    assert events[-1]["type"] == "response.failed"
    assert final["status"] == "failed"
    assert final["error"] == {"code": "server_error", "message": "gone"}


def test_failure_codes_are_openais() -> None:
    framer = ResponseEventFramer(ECHO, ToolNames())
    framer.chunk(chunk({"content": "x"}))
    (event,) = read_events(framer.error(RateLimited("slow down"), "req_1").decode())[-1:]
    assert event["response"]["error"]["code"] == "rate_limit_exceeded"


def test_an_empty_stream_still_opens_and_completes() -> None:
    final = check_event_order(frame([]))
    assert final["output"] == [] and final["status"] == "completed"


def test_the_sync_answer() -> None:
    completion = {
        "id": "chatcmpl_cd34",
        "model": "m-1",
        "created": 9,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Sure.",
                    "tool_calls": [
                        {
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "apply_patch", "arguments": '{"input":"P"}'},
                        }
                    ],
                },
            }
        ],
        "usage": USAGE["usage"],
    }
    body = json.loads(response_of(completion, ECHO, NAMES))
    assert body["id"] == "resp_cd34" and body["object"] == "response"
    assert body["status"] == "completed" and body["created_at"] == 9
    message, custom = body["output"]
    assert message["content"][0] == {
        "type": "output_text",
        "text": "Sure.",
        "annotations": [],
        "logprobs": [],
    }
    assert custom["type"] == "custom_tool_call" and custom["input"] == "P"
    assert custom["call_id"] == "call_9"
    assert body["usage"]["credits"] == "0.0100"


def test_a_namespaced_call_names_its_namespace() -> None:
    names = ToolNames(namespaced={"ns__spawn": ("ns", "spawn")})
    framer = ResponseEventFramer(ECHO, names)
    raw = framer.chunk(chunk(call(0, "{}", "ns__spawn", "call_3"), finish="tool_calls")) or b""
    final = check_event_order(read_events((raw + framer.end(USAGE)).decode()))
    (item,) = final["output"]
    assert (item["namespace"], item["name"], item["arguments"]) == ("ns", "spawn", "{}")


def test_signed_thinking_goes_into_the_reasoning_items_encrypted_content() -> None:
    block = {"type": "thinking", "thinking": "Hmm.", "signature": "sig-1"}
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    events = frame(
        [
            chunk({"reasoning_content": "Hmm."}),
            chunk({"thinking_blocks": [block]}),
            chunk({"thinking_blocks": [redacted]}),
            chunk({"content": "Hi"}, finish="stop"),
        ]
    )
    reasoning, message = check_event_order(events)["output"]
    assert reasoning["encrypted_content"] == signed_thinking([block, redacted])
    assert message["content"][0]["text"] == "Hi"
