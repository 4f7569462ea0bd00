"""Stored Responses API responses (`Store.put_response` and the rest), on every backend: kept
per tenant, gone once deleted or expired, their input items listed a page at a time."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.store.base import Store, StoredResponse
from gateway.store.responses import ItemOrder, page_items
from gateway.store.sqlite import SqliteStore
from tests.store.support import Run

DAY = 86_400.0


def items(count: int) -> list[dict[str, Any]]:
    return [
        {"id": f"msg_{i}", "type": "message", "role": "user", "content": f"turn {i}"}
        for i in range(count)
    ]


def stored(
    response_id: str = "resp_1",
    *,
    tenant: str = "t1",
    inputs: list[dict[str, Any]] | None = None,
    expires_at: float | None = None,
) -> StoredResponse:
    now = time.time()
    return StoredResponse(
        response_id=response_id,
        tenant=tenant,
        response=b'{"id":"' + response_id.encode() + b'","object":"response","output":[]}',
        input_items=items(2) if inputs is None else inputs,
        created_at=now,
        expires_at=now + 30 * DAY if expires_at is None else expires_at,
    )


def test_a_response_is_kept_for_its_tenant_only(store: Store, run: Run) -> None:
    record = stored()
    run(store.put_response(record))
    assert run(store.get_response("t1", "resp_1")) == record
    assert run(store.get_response("t2", "resp_1")) is None
    assert run(store.delete_response("t2", "resp_1")) is False
    assert run(store.response_input_items("t2", "resp_1", limit=10)) is None
    assert run(store.get_response("t1", "resp_1")) == record  # the other tenant touched nothing


def test_a_deleted_response_is_gone(store: Store, run: Run) -> None:
    run(store.put_response(stored()))
    assert run(store.delete_response("t1", "resp_1")) is True
    assert run(store.get_response("t1", "resp_1")) is None
    assert run(store.response_input_items("t1", "resp_1", limit=10)) is None
    assert run(store.delete_response("t1", "resp_1")) is False


def test_an_unknown_response_is_none(store: Store, run: Run) -> None:
    assert run(store.get_response("t1", "resp_nothing")) is None
    assert run(store.delete_response("t1", "resp_nothing")) is False


def test_an_expired_response_is_gone(store: Store, run: Run) -> None:
    run(store.put_response(stored(expires_at=time.time() - 1)))
    assert run(store.get_response("t1", "resp_1")) is None
    assert run(store.response_input_items("t1", "resp_1", limit=10)) is None
    assert run(store.delete_response("t1", "resp_1")) is False


def test_a_response_put_again_is_replaced(store: Store, run: Run) -> None:
    run(store.put_response(stored(inputs=items(1))))
    again = stored(inputs=items(3))
    run(store.put_response(again))
    assert run(store.get_response("t1", "resp_1")) == again


def test_input_items_page_newest_first_by_default(store: Store, run: Run) -> None:
    run(store.put_response(stored(inputs=items(5))))
    first = run(store.response_input_items("t1", "resp_1", limit=2))
    assert first is not None and first.has_more
    assert [i["id"] for i in first.data] == ["msg_4", "msg_3"]
    rest = run(store.response_input_items("t1", "resp_1", limit=10, after="msg_3"))
    assert rest is not None and not rest.has_more
    assert [i["id"] for i in rest.data] == ["msg_2", "msg_1", "msg_0"]
    ascending = run(store.response_input_items("t1", "resp_1", limit=5, order="asc"))
    assert ascending is not None and not ascending.has_more
    assert ascending.data == items(5)  # as they were put, content and all


def test_items_of_any_json_shape_come_back_equal(store: Store, run: Run) -> None:
    odd = [
        {
            "id": "fc_1",
            "type": "function_call",
            "arguments": '{"a": [1, 2.5, null, true]}',
            "nested": {"list": [{"x": -3}], "none": None, "flag": False, "text": "ü ☃"},
        }
    ]
    run(store.put_response(stored(inputs=odd)))
    record = run(store.get_response("t1", "resp_1"))
    assert record is not None and record.input_items == odd


def test_sqlite_sweeps_expired_responses_as_it_writes(tmp_path: Path, run: Run) -> None:
    """Expired rows leave the file with later writes (reads never return them anyway)."""
    path = tmp_path / "gateway.db"
    store = SqliteStore(path)
    run(store.open())
    try:
        for i in range(3):
            run(store.put_response(stored(f"resp_old{i}", expires_at=time.time() - 1)))
        run(store.put_response(stored("resp_new")))
    finally:
        run(store.close())
    with sqlite3.connect(path) as check:
        ids = [row[0] for row in check.execute("SELECT response_id FROM responses")]
    assert ids == ["resp_new"]


@given(
    count=st.integers(min_value=0, max_value=30),
    limit=st.integers(min_value=1, max_value=12),
    ascending=st.booleans(),
)
def test_walking_the_pages_gives_every_item_once_in_order(
    count: int, limit: int, ascending: bool
) -> None:
    everything = items(count)
    order: ItemOrder = "asc" if ascending else "desc"
    walked: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        page = page_items(everything, limit=limit, after=after, order=order)
        assert len(page.data) <= limit
        walked += page.data
        if not page.has_more:
            break
        after = page.data[-1]["id"]
    assert walked == (everything if ascending else everything[::-1])
