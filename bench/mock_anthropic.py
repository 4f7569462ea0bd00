#!/usr/bin/env python3
"""Minimal, fast Anthropic Messages API mock upstream (pure ASGI), the twin of mock_upstream.py.

Endpoints
  POST /v1/messages   a whole message (with usage), or Anthropic's event stream when
                      "stream": true (message_start, ping, one text block in
                      MOCK_STREAM_CHUNKS deltas, message_delta, message_stop)
  GET  /health        "ok"

The answer text, the prompt-token estimate, the delays and the flags are mock_upstream.py's,
so the direct baselines of the chat and Messages paths do the same work.

    python bench/mock_anthropic.py --host 127.0.0.1 --port 8002
"""

import argparse
import asyncio
import json
import uuid

import mock_upstream as openai_mock

SSE_HEADERS = openai_mock.SSE_HEADERS
WORDS = openai_mock.ANSWER_WORDS


def _event(obj):
    data = json.dumps(obj, separators=(",", ":")).encode()
    return b"event: " + obj["type"].encode() + b"\ndata: " + data + b"\n\n"


async def _messages(req, send):
    model = req.get("model") or "mock-claude"
    prompt = openai_mock._prompt_tokens(req.get("messages") or [])
    mid = "msg_" + uuid.uuid4().hex[:24]
    if openai_mock.DELAY_S > 0:
        await asyncio.sleep(openai_mock.DELAY_S)
    if not req.get("stream"):
        n = min(int(req.get("max_tokens") or 16), len(WORDS))
        body = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": " ".join(WORDS[:n])}],
            "stop_reason": "max_tokens" if n < len(WORDS) else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": prompt,
                "output_tokens": n,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        await openai_mock._send_json(send, 200, body)
        return
    chunks = openai_mock.STREAM_CHUNKS
    message = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": 1},
    }
    head = _event({"type": "message_start", "message": message}) + _event({"type": "ping"})
    head += _event(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    )
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    await send({"type": "http.response.body", "body": head, "more_body": True})
    for i in range(chunks):
        if openai_mock.CHUNK_DELAY_S > 0:
            await asyncio.sleep(openai_mock.CHUNK_DELAY_S)
        delta = {"type": "text_delta", "text": (" " if i else "") + WORDS[i % len(WORDS)]}
        frame = _event({"type": "content_block_delta", "index": 0, "delta": delta})
        await send({"type": "http.response.body", "body": frame, "more_body": True})
    tail = _event({"type": "content_block_stop", "index": 0})
    tail += _event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": chunks},
        }
    )
    tail += _event({"type": "message_stop"})
    await send({"type": "http.response.body", "body": tail, "more_body": False})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await openai_mock.app(scope, receive, send)
        return
    if scope["type"] != "http":
        return
    path, method = scope["path"], scope["method"]
    if path == "/v1/messages" and method == "POST":
        raw = await openai_mock._read_body(receive)
        try:
            req = json.loads(raw) if raw else {}
        except ValueError as e:
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": str(e)}}
            await openai_mock._send_json(send, 400, error)
            return
        await _messages(req, send)
    else:
        await openai_mock.app(scope, receive, send)  # /health, and 404s


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8002)
    p.add_argument("--delay-ms", type=float, default=openai_mock.DELAY_S * 1000)
    p.add_argument("--stream-chunks", type=int, default=openai_mock.STREAM_CHUNKS)
    p.add_argument("--chunk-delay-ms", type=float, default=openai_mock.CHUNK_DELAY_S * 1000)
    a = p.parse_args()
    openai_mock.DELAY_S = a.delay_ms / 1000.0
    openai_mock.STREAM_CHUNKS = a.stream_chunks
    openai_mock.CHUNK_DELAY_S = a.chunk_delay_ms / 1000.0
    import uvicorn

    uvicorn.run(
        app,
        host=a.host,
        port=a.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        lifespan="on",
    )


if __name__ == "__main__":
    main()
