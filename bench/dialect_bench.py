#!/usr/bin/env python3
"""What each client dialect costs per call on one core, in process: the edge's work on the
chat path (OpenAI) and on the Messages path (Anthropic), translated and passed through.

    .venv/bin/python bench/dialect_bench.py [--rounds 5] [--calls 20000]

Each row is timed for `--calls` calls per round, the rounds interleaved (row after row, round
after round) so that the machine's load falls on all rows alike; it prints the median of the
rounds and their spread, in microseconds per call. The rows:

- decode: the body decoded into the service's request (chat: one msgspec decode; Messages:
  decode, Anthropic's checks and the translation);
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


def _chat_decode() -> None:
    decode_chat_request(CHAT_BODY)


def _messages_decode() -> None:
    request, raw = decode_messages(MESSAGES_BODY, MessagesRequest)
    translation = to_chat_request(request, raw)
    MessagesCall(raw, {}, translation.problems, dropped=translation.dropped)


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


def _chat_chunk() -> None:
    _OPENAI_FRAMER.chunk(CHUNK)


def _messages_chunk() -> None:
    _MESSAGE_FRAMER.chunk(CHUNK)


def _native_chunk() -> None:
    _NATIVE_FRAMER.chunk(EVENT)


_METRICS = Metrics(CollectorRegistry(), units_per_credit=10_000)


def _dialect_counter() -> None:
    _METRICS.dialect_request("anthropic", "/v1/messages", 200)


ROWS: list[tuple[str, Callable[[], None]]] = [
    ("decode: chat (OpenAI)", _chat_decode),
    ("decode: Messages, translated", _messages_decode),
    ("answer: chat (OpenAI)", _chat_answer),
    ("answer: Messages, translated", _messages_answer),
    ("answer: Messages, native", _native_answer),
    ("stream chunk: chat (OpenAI)", _chat_chunk),
    ("stream chunk: Messages, translated", _messages_chunk),
    ("stream chunk: Messages, native", _native_chunk),
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
