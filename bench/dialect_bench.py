#!/usr/bin/env python3
"""What each client dialect costs per call on one core, in process: the edge's work on the
chat path (OpenAI), on the Messages path (Anthropic) and on the Responses path (OpenAI's
Responses API), translated and passed through.

    .venv/bin/python bench/dialect_bench.py [--rounds 5] [--calls 20000]

Each row is timed for `--calls` calls per round, the rounds interleaved (row after row, round
after round) so that the machine's load falls on all rows alike; it prints the median of the
rounds and their spread, in microseconds per call. The rows:

- decode: the body decoded into the service's request (chat: one msgspec decode; Messages:
  decode, Anthropic's checks and the translation; Responses: decode and the translation, of
  a short body and of Codex CLI's first turn, 40 KB with 16 tools);
- answer: a finished chat.completion rendered for the client (chat: one encode; Messages: the
  message made from it), and a native message finished with its credits;
- stream: one content chunk framed (chat: `data:`; Messages: the event made from a
  chat.completion.chunk, or a native event passed on);
- the metrics counter of the dialect (`gateway_dialect_requests_total`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry

from gateway.http.anthropic.answer import finished_message, message_of
from gateway.http.anthropic.dialect import MessagesCall
from gateway.http.anthropic.events import MessageEventFramer, NativeEventFramer
from gateway.http.anthropic.request import decode_messages, to_chat_request
from gateway.http.chat_body import decode_chat_request
from gateway.http.openai_responses.answer import response_of
from gateway.http.openai_responses.events import ResponseEventFramer
from gateway.http.openai_responses.native import NativeResponseFramer, ResponsesCall
from gateway.http.openai_responses.request import decode_responses
from gateway.http.openai_responses.request import to_chat_request as responses_to_chat
from gateway.http.openai_sse import OPENAI_CHAT
from gateway.metrics import Metrics
from gateway.schemas.messages import MessagesRequest

SYSTEM, QUESTION = "You are a helpful assistant.", "Say hello in one short sentence."
CHAT_BODY = msgspec.json.encode(
    {
        "model": "bench-model",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
        ],
        "max_tokens": 16,
    }
)
MESSAGES_BODY = msgspec.json.encode(
    {
        "model": "bench-model",
        "system": SYSTEM,
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": 16,
    }
)
RESPONSES_BODY = msgspec.json.encode(
    {"model": "bench-model", "instructions": SYSTEM, "input": QUESTION, "max_output_tokens": 16}
)
_CODEX_TOOL = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command in a PTY, returning output or a session ID. " * 8,
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {
            "cmd": {"type": "string", "description": "Shell command to execute."},
            "workdir": {"type": "string", "description": "The working directory."},
            "yield_time_ms": {"type": "number", "description": "How long to wait."},
        },
        "required": ["cmd"],
        "additionalProperties": False,
    },
}
CODEX_BODY = msgspec.json.encode(
    {
        "model": "bench-model",
        "instructions": "You are a coding agent running in the Codex CLI. " * 500,
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "Rules. " * 400}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context/>"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": QUESTION}],
            },
        ],
        "tools": [{**_CODEX_TOOL, "name": f"tool_{i}"} for i in range(15)]
        + [{"type": "web_search"}],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "01a220a1-46df-7a93-967b-dbacadde1ab4",
    }
)
COMPLETION: dict[str, Any] = {
    "id": "chatcmpl_0123456789abcdef0123456789abcdef",
    "object": "chat.completion",
    "created": 1,
    "model": "bench-model",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello! I am a mock assistant."},
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 20,
        "completion_tokens": 8,
        "total_tokens": 28,
        "credits": "0.0220",
        "credits_usd_reference": "0.0000",
    },
}
NATIVE: dict[str, Any] = {
    "id": "chatcmpl_0123456789abcdef0123456789abcdef",
    "type": "message",
    "role": "assistant",
    "model": "bench-claude",
    "content": [{"type": "text", "text": "Hello! I am a mock assistant."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 20, "output_tokens": 8},
}
CREDITS = {"credits": "0.0220", "credits_usd_reference": "0.0000"}
CHUNK = {
    "id": "chatcmpl_0123456789abcdef0123456789abcdef",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "bench-model",
    "choices": [{"index": 0, "delta": {"content": " word"}, "finish_reason": None}],
}
EVENT = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " w"}}

RESPONSE: dict[str, Any] = {
    "id": "resp_0123456789abcdef",
    "object": "response",
    "created_at": 1,
    "status": "completed",
    "model": "bench-model",
    "output": [
        {
            "id": "msg_0123456789abcdef",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hello!", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 20, "output_tokens": 8, "total_tokens": 28},
}
RESPONSE_EVENT = {
    "type": "response.output_text.delta",
    "item_id": "msg_0123456789abcdef",
    "output_index": 0,
    "content_index": 0,
    "delta": " w",
    "sequence_number": 5,
}


def _chat_decode() -> None:
    decode_chat_request(CHAT_BODY)


def _messages_decode() -> None:
    request, raw = decode_messages(MESSAGES_BODY, MessagesRequest)
    translation = to_chat_request(request, raw)
    MessagesCall(raw, {}, translation.problems, dropped=translation.dropped)


def _responses_decode() -> None:
    request, raw = decode_responses(RESPONSES_BODY)
    ResponsesCall(raw, responses_to_chat(request).problems)


def _codex_decode() -> None:
    request, raw = decode_responses(CODEX_BODY)
    ResponsesCall(raw, responses_to_chat(request).problems)


_TRANSLATION = responses_to_chat(decode_responses(RESPONSES_BODY)[0])


def _responses_answer() -> None:
    response_of(COMPLETION, _TRANSLATION.echo, _TRANSLATION.names)


def _responses_native_answer() -> None:
    ResponsesCall({}).completion(dict(RESPONSE), CREDITS)


def _chat_answer() -> None:
    OPENAI_CHAT.completion(COMPLETION)


def _messages_answer() -> None:
    message_of(COMPLETION)


def _native_answer() -> None:
    finished_message(dict(NATIVE), CREDITS)


_OPENAI_FRAMER = OPENAI_CHAT.framer(include_usage=False)
_MESSAGE_FRAMER = MessageEventFramer()
_MESSAGE_FRAMER.chunk(CHUNK)  # past message_start and the block's opening
_NATIVE_FRAMER = NativeEventFramer(call_id="c", model="m")
_RESPONSE_FRAMER = ResponseEventFramer(_TRANSLATION.echo, _TRANSLATION.names)
_RESPONSE_FRAMER.chunk(CHUNK)  # past response.created and the item's opening
_NATIVE_RESPONSE_FRAMER = NativeResponseFramer(model="m")


def _chat_chunk() -> None:
    _OPENAI_FRAMER.chunk(CHUNK)


def _messages_chunk() -> None:
    _MESSAGE_FRAMER.chunk(CHUNK)


def _native_chunk() -> None:
    _NATIVE_FRAMER.chunk(EVENT)


def _responses_chunk() -> None:
    _RESPONSE_FRAMER.chunk(CHUNK)


def _responses_native_chunk() -> None:
    _NATIVE_RESPONSE_FRAMER.chunk(dict(RESPONSE_EVENT))


_METRICS = Metrics(CollectorRegistry(), units_per_credit=10_000)


def _dialect_counter() -> None:
    _METRICS.dialect_request("anthropic", "/v1/messages", 200)


ROWS: list[tuple[str, Callable[[], None]]] = [
    ("decode: chat (OpenAI)", _chat_decode),
    ("decode: Messages, translated", _messages_decode),
    ("decode: Responses (short body)", _responses_decode),
    ("decode: Responses (Codex's first turn)", _codex_decode),
    ("answer: chat (OpenAI)", _chat_answer),
    ("answer: Messages, translated", _messages_answer),
    ("answer: Messages, native", _native_answer),
    ("answer: Responses, translated", _responses_answer),
    ("answer: Responses, native", _responses_native_answer),
    ("stream chunk: chat (OpenAI)", _chat_chunk),
    ("stream chunk: Messages, translated", _messages_chunk),
    ("stream chunk: Messages, native", _native_chunk),
    ("stream chunk: Responses, translated", _responses_chunk),
    ("stream chunk: Responses, native", _responses_native_chunk),
    ("metrics: the dialect counter", _dialect_counter),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {name: [] for name, _ in ROWS}
    for _ in range(args.rounds):
        for name, call in ROWS:
            started = time.process_time()
            for _ in range(args.calls):
                call()
            samples[name].append((time.process_time() - started) * 1e6 / args.calls)
    print("| per call (µs of one core) | median | rounds |")
    print("|---|---:|---|")
    for name, values in samples.items():
        spread = f"{min(values):.2f} to {max(values):.2f}"
        print(f"| {name} | {statistics.median(values):.2f} | {spread} |")


if __name__ == "__main__":
    main()
