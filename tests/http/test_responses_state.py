"""The Responses API's stored state as a request sees it (`gateway.http.openai_responses.state`),
on a real SQLite store: input items given ids as OpenAI lists them, a previous response's
turns put before the client's input for translation and for passthrough, a `store: false`
answer never written, an unknown previous response refused in OpenAI's terms."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gateway.errors import PreviousResponseNotFound
from gateway.http.openai_responses.answer import signed_thinking
from gateway.http.openai_responses.request import decode_responses, to_chat_request
from gateway.http.openai_responses.state import ResponseState, input_items_of, upstream_items
from gateway.schemas.responses import ResponsesRequest
from gateway.store.sqlite import SqliteStore
from tests.store.support import Run

ANSWER = {
    "id": "resp_first",
    "object": "response",
    "status": "completed",
    "output": [
        {
            "id": "rs_gw",
            "type": "reasoning",
            "summary": [],
            "encrypted_content": signed_thinking([{"type": "thinking", "thinking": "hm"}]),
        },
        {
            "id": "msg_out",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hi there", "annotations": []}],
        },
    ],
    "usage": {"input_tokens": 3, "output_tokens": 2},
}


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop_runner:
        yield loop_runner


@pytest.fixture
def store(tmp_path: Path, runner: asyncio.Runner) -> Iterator[SqliteStore]:
    sqlite = SqliteStore(tmp_path / "gateway.db")
    runner.run(sqlite.open())
    yield sqlite
    runner.run(sqlite.close())


def request(body: dict[str, Any]) -> tuple[ResponsesRequest, dict[str, Any]]:
    return decode_responses(json.dumps({"model": "auto", **body}).encode())


@pytest.fixture
def run(runner: asyncio.Runner) -> Run:
    return runner.get_loop().run_until_complete


def begin(run: Run, store: SqliteStore, body: dict[str, Any], tenant: str = "t1") -> ResponseState:
    typed, _ = request(body)
    state = ResponseState(store, tenant, typed)
    run(state.load())
    return state


def test_input_items_get_ids_and_parts() -> None:
    items = input_items_of(
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "message", "id": "msg_mine", "role": "user", "content": []},
        ]
    )
    assert [item["id"][:4] for item in items[:3]] == ["msg_", "msg_", "fco_"]
    assert items[0]["content"] == [{"type": "input_text", "text": "Hi"}]
    assert items[1]["content"] == [{"type": "output_text", "text": "Hello"}]
    assert items[3]["id"] == "msg_mine"  # the client's own id stands
    assert input_items_of("Hi")[0]["role"] == "user"


def test_upstream_items_drop_ids_and_unreadable_reasoning() -> None:
    opaque = {"id": "rs_up", "type": "reasoning", "summary": [], "encrypted_content": "gAAA"}
    only_id = {"id": "rs_id", "type": "reasoning", "summary": []}
    sent = upstream_items([*ANSWER["output"], opaque, only_id])  # type: ignore[list-item]
    assert sent == [{k: v for k, v in ANSWER["output"][1].items() if k != "id"}, opaque]  # type: ignore[union-attr]


def test_a_kept_answer_is_continued_for_translation_and_passthrough(
    store: SqliteStore, run: Run
) -> None:
    first = begin(run, store, {"input": "Hello"})
    run(first.kept(msgspec.json.encode(ANSWER)))
    state = begin(run, store, {"input": "And then?", "previous_response_id": "resp_first"})
    typed, raw = state.continued(
        *request({"input": "And then?", "previous_response_id": "resp_first"})
    )
    chat = msgspec.to_builtins(to_chat_request(typed).chat)["messages"]
    assert [m["role"] for m in chat] == ["user", "assistant", "user"]
    assert chat[1]["thinking_blocks"] == [
        {"type": "thinking", "thinking": "hm"}
    ]  # the gateway's own
    assert "previous_response_id" not in raw
    assert [item.get("role") for item in raw["input"]] == ["user", "assistant", "user"]
    run(state.kept(msgspec.json.encode({**ANSWER, "id": "resp_second"})))
    record = run(store.get_response("t1", "resp_second"))
    assert record is not None
    assert [item["id"] for item in record.input_items][1:3] == ["rs_gw", "msg_out"]
    assert len(record.input_items) == 4  # Hello, the first's output (2), And then?


def test_an_unknown_or_other_tenants_previous_response_is_refused(
    store: SqliteStore, run: Run
) -> None:
    run(begin(run, store, {"input": "Hello"}).kept(msgspec.json.encode(ANSWER)))
    for tenant, previous in (("t2", "resp_first"), ("t1", "resp_nothing")):
        typed, _ = request({"input": "Go", "previous_response_id": previous})
        with pytest.raises(PreviousResponseNotFound) as caught:
            run(ResponseState(store, tenant, typed).load())
        assert caught.value.status_code == 400
        assert caught.value.details[0].field == "previous_response_id"


def test_store_false_writes_nothing(store: SqliteStore, run: Run) -> None:
    run(begin(run, store, {"input": "Hello", "store": False}).kept(msgspec.json.encode(ANSWER)))
    assert run(store.get_response("t1", "resp_first")) is None


def test_a_failed_response_is_not_kept(store: SqliteStore, run: Run) -> None:
    failed = {**ANSWER, "status": "failed"}
    run(begin(run, store, {"input": "Hello"}).kept(msgspec.json.encode(failed)))
    assert run(store.get_response("t1", "resp_first")) is None
