"""Upstream traffic recorded from the real APIs by third parties, for the fakes to replay.

Each JSON file here holds only recorded payloads (requests, answers, stream bodies, error
bodies), copied as data from public SDK and gateway repositories; its `source` names the
repository, the path and the commit it came from (and says so when a fixture was assembled
from two recordings). `claude_code_requests.json` is recorded here, from the Claude Code
release `tests/agents` pins; its `source` names the release, the date and how (its
recorder: tests/support/claude_code_session.py). The shapes:

    exchanges: [{request, status, body | sse}]   a cassette: what was sent, what came back
                                                 (`sse`: the stream body as it was received)
    message / response + events                  a whole answer and its stream's event
                                                 payloads (one JSON text per event, unframed)
    status + body, answers: [...]                error bodies with their status
    sessions: [{model, requests: [{method, path,  a client's requests, each body the text it
                headers, body}]}]                sent

    recorded = load("anthropic_tool_loop_thinking")
    fake.enqueue(Reply(message=recorded["exchanges"][0]["body"]))
    fake.enqueue(StreamReply(events=sse_events(recorded["exchanges"][0]["sse"])))
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["anthropic_frames", "gemini_frames", "load", "sse_events"]

_HERE = Path(__file__).parent
_EVENT = re.compile(r".*?(?:\r\n\r\n|\n\n)", re.DOTALL)


def load(name: str) -> dict[str, Any]:
    """The fixture `name` (without `.json`); it must name its source."""
    recorded: dict[str, Any] = json.loads((_HERE / f"{name}.json").read_text(encoding="utf-8"))
    source = recorded["source"]
    assert source["repository"] and source["path"], f"{name}: the fixture must name its source"
    return recorded


def sse_events(body: str) -> list[bytes]:
    """A recorded stream body cut into its events, each with its own blank line, byte for
    byte as received (so a fake can stop after any of them)."""
    events = _EVENT.findall(body)
    assert "".join(events) == body, "a recorded stream body ends with a complete event"
    return [event.encode() for event in events]


def anthropic_frames(payloads: list[str]) -> list[bytes]:
    """Recorded Anthropic event payloads framed as the Messages API sends them."""
    return [
        f"event: {json.loads(payload)['type']}\ndata: {payload}\n\n".encode()
        for payload in payloads
    ]


def gemini_frames(payloads: list[str]) -> list[bytes]:
    """Recorded Gemini event payloads framed as `alt=sse` sends them."""
    return [f"data: {payload}\r\n\r\n".encode() for payload in payloads]
