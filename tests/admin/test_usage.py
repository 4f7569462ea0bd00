"""The usage report over a real SQLite store: pages through a ledger longer than one page,
takes a task entry's model from its task when the entry predates the model field, and reads
`from`/`to` the way operators write them."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.admin.usage import TimeRange, parse_range, usage
from gateway.errors import ValidationFailed
from gateway.store.base import RateLimits, TaskCreate
from gateway.store.sqlite import SqliteStore
from tests.store.support import admission, create_confirmed, settlement


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_ranges_as_operators_write_them() -> None:
    now = _ts("2026-11-23T12:00:00")
    assert parse_range(None, None, now=now) == TimeRange(since=now - 30 * 86_400, until=now)
    day = parse_range("2026-11-01", "2026-11-01", now=now)
    assert day == TimeRange(since=_ts("2026-11-01T00:00:00"), until=_ts("2026-11-02T00:00:00"))
    moment = parse_range("2026-11-01T10:00:00+02:00", "2026-11-01T12:00:00Z", now=now)
    assert moment == TimeRange(since=_ts("2026-11-01T08:00:00"), until=_ts("2026-11-01T12:00:00"))
    assert parse_range(None, "2026-11-10", now=now).since == _ts("2026-10-12T00:00:00")
    noon = parse_range("2026-11-01T12:00:00Z", "2026-11-01", now=now)  # within the `to` day
    assert noon == TimeRange(since=_ts("2026-11-01T12:00:00"), until=_ts("2026-11-02T00:00:00"))
    same = parse_range("2026-11-01T12:00:00Z", "2026-11-01T12:00:00Z", now=now)
    assert same.since == same.until  # an empty range, not a mistake
    for start, end, field in (
        ("2026-11-02", "2026-11-01", "from"),
        ("soon", None, "from"),
        (None, "2026-02-30", "to"),
        (None, "2026-11-01T24:00:00Z", "to"),
    ):
        with pytest.raises(ValidationFailed) as caught:
            parse_range(start, end, now=now)
        assert caught.value.details[0].field == field


def test_a_long_ledger_is_read_in_pages_and_old_task_entries_find_their_model(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gateway.db"

    async def scenario() -> None:
        store = SqliteStore(path)
        await store.open()
        try:
            await store.grant("t1", 10**9, entry_id="g1", reason="top-up")
            for i in range(1_203):  # (no requests bucket: the task's create must not meet it)
                adm = admission(f"c{i}", hold=10, rpm=0)
                await store.admit(adm)
                await store.settle(settlement(adm, charge=2, model="sim-chat-1"))
            await create_confirmed(
                store,
                TaskCreate(
                    task_id="task_old",
                    tenant="t1",
                    api_key_id="k1",
                    request_id="req_old",
                    limits=RateLimits(requests_per_minute=10_000),
                    capability="text_to_music",
                    model="auto",
                    resolved_model="alpha-5.5",
                    price_units=800_000,
                    input={"prompt": "a tune"},
                    metadata={},
                ),
            )
            # As a ledger written before entries named their model would have it.
            with sqlite3.connect(path) as conn:
                conn.execute("UPDATE ledger SET model = '' WHERE id = 'debit:task_old'")
            await store.request_cancel("t1", "task_old")

            rows = await usage(store, ["t1", "t2"], TimeRange(since=0.0, until=2e9))
            assert [(r.model, r.requests, r.tasks) for r in rows] == [
                ("alpha-5.5", 0, 1),
                ("sim-chat-1", 1_203, 0),
            ]
            music, chat = rows
            assert (music.charged_units, music.refunded_units, music.spend_units) == (
                800_000,
                800_000,
                0,
            )
            assert (chat.charged_units, chat.spend_units) == (2_406, 2_406)
            assert len({r.day for r in rows}) == 1 and rows[0].tenant == "t1"
            assert await usage(store, ["t1"], TimeRange(since=0.0, until=1.0)) == []
        finally:
            await store.close()

    asyncio.run(scenario())
