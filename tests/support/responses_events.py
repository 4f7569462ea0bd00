"""What the Responses API's tests share: reading an event stream off the wire, and
checking it event by event against the order OpenAI's streams keep."""

from __future__ import annotations

import json
from typing import Any

import httpx

__all__ = ["check_event_order", "read_events", "stream_events"]

_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
_ITEM_DELTAS = (
    "response.output_text.delta",
    "response.output_text.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
    "response.content_part.added",
    "response.content_part.done",
)
_PART_DELTAS = (
    "response.output_text.delta",
    "response.output_text.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
)


def read_events(raw: str) -> list[dict[str, Any]]:
    """The events of an SSE body; each `event:` line names its data's `type`."""
    events: list[dict[str, Any]] = []
    for block in raw.split("\n\n"):
        lines = block.strip().splitlines()
        if not lines:
            continue
        name = next(line[7:] for line in lines if line.startswith("event: "))
        data = json.loads("".join(line[6:] for line in lines if line.startswith("data: ")))
        assert data["type"] == name, block
        events.append(data)
    return events


def stream_events(http: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return read_events(response.read().decode())


def check_event_order(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Assert OpenAI's order and return the final response: created, in_progress, each item
    added before its parts and deltas and done after them, one item open at a time, a part
    opened before its deltas, then exactly one terminal event; sequence numbers 0, 1, 2, ..."""
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"], kinds
    assert kinds[-1] in _TERMINAL and sum(kinds.count(t) for t in _TERMINAL) == 1, kinds
    final = events[-1]["response"]
    assert final["id"].startswith("resp_") and final["id"] == events[0]["response"]["id"]
    open_item: int | None = None
    open_part = False
    done_items: dict[int, dict[str, Any]] = {}
    for event in events[2:-1]:
        kind = event["type"]
        if kind == "response.output_item.added":
            assert open_item is None, f"an item opened while {open_item} is open"
            open_item = event["output_index"]
            assert open_item == len(done_items)
            assert event["item"]["status"] == "in_progress"
        elif kind == "response.output_item.done":
            assert open_item == event["output_index"] and not open_part
            done_items[open_item] = event["item"]
            open_item = None
        elif kind in _ITEM_DELTAS:
            assert event["output_index"] == open_item, f"{kind} without an open item"
            if kind == "response.content_part.added":
                assert not open_part
                open_part = True
            elif kind == "response.content_part.done":
                assert open_part
                open_part = False
            elif kind in _PART_DELTAS:
                assert open_part, f"{kind} outside a content part"
        else:
            raise AssertionError(f"unexpected event {kind}")
    if kinds[-1] != "response.failed":
        assert open_item is None
        assert final["output"] == [done_items[i] for i in range(len(done_items))]
        assert final["usage"]["total_tokens"] > 0 and final["usage"]["credits"]
    return dict(final)
