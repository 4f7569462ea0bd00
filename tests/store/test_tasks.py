"""Tasks: the prepaid create (rate, idempotency, debit, enqueue in one step), the queue and its
leases, cancel and finalize with refunds at most once; the wallet stays the sum of its ledger.

Every test runs on SQLite and on real Redis (the `store` fixture). Lease expiry uses short
leases and a short sleep on both; the SQLite-only tests at the end move its clock instead.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gateway.store.base import (
    AdmissionOutcome,
    IdempotencyClaim,
    RateLimits,
    Store,
    TaskCreate,
    TaskCreateOutcome,
    TaskFinal,
    TaskProgress,
    TaskRecord,
)
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore
from gateway.store.sqlite.schema import SCHEMA_VERSION
from tests.store.support import Run, admission, claim, create_confirmed, settlement

CREATED = TaskCreateOutcome.CREATED
REPLAY = TaskCreateOutcome.REPLAY
SHORT = 0.3
"""A lease short enough to run out during a test (slept past with `_lapse`). On Redis a
vanished worker's entry is found once idle for the claimer's lease (workers share one lease
setting), so the reclaiming worker uses it too."""


def create(
    task_id: str,
    *,
    tenant: str = "t1",
    price: int = 100,
    capability: str = "text_to_image",
    rpm: int = 1000,
    idempotency: IdempotencyClaim | None = None,
) -> TaskCreate:
    return TaskCreate(
        task_id=task_id,
        tenant=tenant,
        api_key_id="k1",
        request_id=f"req_{task_id}",
        limits=RateLimits(requests_per_minute=rpm),
        capability=capability,
        model="auto",
        resolved_model="image-model-2",
        price_units=price,
        input={"prompt": "a red fox", "n": 1, "strength": 0.5},
        metadata={"job": task_id},
        idempotency=idempotency,
    )


def task_claim(fingerprint: str = "fp-a") -> IdempotencyClaim:
    return claim("t1:POST:/v1/images/generations:key-1", fingerprint)


def _made(store: Store, run: Run, c: TaskCreate) -> TaskRecord:
    result = run(create_confirmed(store, c))
    assert result.outcome is CREATED and result.task is not None
    return result.task


def _balanced(store: Store, run: Run, tenant: str = "t1") -> int:
    """The balance, asserted equal to the sum of the tenant's whole ledger."""
    entries = run(store.ledger(tenant, limit=1000)).entries
    balance = run(store.wallet(tenant)).balance_units
    assert balance == sum(e.amount_units for e in entries)
    return balance


def _entries(store: Store, run: Run, tenant: str = "t1") -> dict[str, Any]:
    return {e.id: e for e in run(store.ledger(tenant, limit=1000)).entries}


def _lapse() -> None:
    time.sleep(SHORT + 0.15)


def test_create_debits_once_and_queues_the_task(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    before = time.time()
    result = run(create_confirmed(store, create("task_a", price=300)))

    assert result.outcome is CREATED and result.available_units == 1000
    assert result.rate.remaining_requests == 999
    task = result.task
    assert task is not None
    assert (task.status, task.price_units, task.refunded_units, task.attempts) == (
        "queued",
        300,
        0,
        0,
    )
    assert task.progress == TaskProgress(percent=0.0, stage="queued", message="")
    assert task.input == {"prompt": "a red fox", "n": 1, "strength": 0.5}
    assert task.metadata == {"job": "task_a"} and task.request_id == "req_task_a"
    assert (task.model, task.resolved_model, task.capability) == (
        "auto",
        "image-model-2",
        "text_to_image",
    )
    assert before - 1 <= task.created_at <= time.time() + 1
    assert task.started_at is None and task.worker_id is None and task.lease_until is None
    assert run(store.get_task("t1", "task_a")) == task
    assert run(store.task_queue_depth()) == 1

    debit = _entries(store, run)["debit:task_a"]
    assert (debit.kind, debit.amount_units, debit.balance_after_units) == ("debit", -300, 700)
    assert (debit.task_id, debit.request_id) == ("task_a", "req_task_a")
    assert _balanced(store, run) == 700


def test_insufficient_credits_creates_nothing(store: Store, run: Run) -> None:
    run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
    result = run(create_confirmed(store, create("task_a", price=150)))

    assert result.outcome is TaskCreateOutcome.INSUFFICIENT_CREDITS
    assert result.task is None and result.available_units == 100
    assert result.rate.remaining_requests == 999  # it took one request
    assert run(store.get_task("t1", "task_a")) is None
    assert run(store.list_tasks("t1", limit=10)).tasks == []
    assert run(store.task_queue_depth()) == 0
    assert list(_entries(store, run)) == ["g1"]
    assert _balanced(store, run) == 100


def test_chat_holds_count_against_available(store: Store, run: Run) -> None:
    run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
    chat = admission("c1", hold=80)
    assert run(store.admit(chat)).outcome is AdmissionOutcome.ADMITTED

    refused = run(create_confirmed(store, create("task_a", price=30)))
    assert refused.outcome is TaskCreateOutcome.INSUFFICIENT_CREDITS
    assert refused.available_units == 20
    assert run(create_confirmed(store, create("task_b", price=20))).outcome is CREATED

    # The chat call settles on the same wallet: charges, debits and refunds add up.
    run(store.settle(settlement(chat, charge=50)))
    run(store.finalize_task(TaskFinal(task_id="task_b", status="failed", refund_units=20)))
    assert _balanced(store, run) == 50
    assert run(store.wallet("t1")).held_units == 0


def test_a_price_of_zero_never_fails(store: Store, run: Run) -> None:
    run(store.grant("t1", -10, entry_id="adj", reason="debt", kind="adjustment"))
    result = run(create_confirmed(store, create("task_a", price=0)))
    assert result.outcome is CREATED and result.available_units == -10
    assert list(_entries(store, run)) == ["adj"]  # nothing to debit, no entry
    assert _balanced(store, run) == -10


def test_idempotent_create_replays_the_task_and_debits_once(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    first = _made(store, run, create("task_a", idempotency=task_claim()))

    again = run(create_confirmed(store, create("task_b", idempotency=task_claim())))
    assert again.outcome is REPLAY and again.task == first
    assert again.rate.remaining_requests == 998  # a replay takes a request
    reused = run(create_confirmed(store, create("task_c", idempotency=task_claim("fp-b"))))
    assert reused.outcome is TaskCreateOutcome.KEY_REUSED and reused.task is None

    # A replay shows the task as it is now.
    run(store.claim_task("w1", lease_seconds=30))
    later = run(create_confirmed(store, create("task_d", idempotency=task_claim())))
    assert later.task is not None and later.task.status == "running"

    assert run(store.get_task("t1", "task_b")) is None
    assert [t.task_id for t in run(store.list_tasks("t1", limit=10)).tasks] == ["task_a"]
    assert [e for e in _entries(store, run) if e.startswith("debit:")] == ["debit:task_a"]
    assert _balanced(store, run) == 900


def test_twenty_concurrent_creates_with_one_key_make_one_task(store: Store, run: Run) -> None:
    run(store.grant("t1", 10_000, entry_id="g1", reason="top-up"))

    async def burst() -> list[Any]:
        calls = [
            create_confirmed(store, create(f"task_{i}", idempotency=task_claim()))
            for i in range(20)
        ]
        return await asyncio.gather(*calls)

    results = run(burst())
    # Until the first is confirmed a duplicate is in progress (409); after, a replay.
    outcomes = Counter(r.outcome for r in results)
    assert (
        outcomes[CREATED] == 1
        and outcomes[CREATED] + outcomes[REPLAY] + outcomes[TaskCreateOutcome.IN_PROGRESS] == 20
    ), outcomes
    assert len({r.task.task_id for r in results if r.task is not None}) == 1
    assert run(store.task_queue_depth()) == 1
    assert len([e for e in _entries(store, run) if e.startswith("debit:")]) == 1
    assert _balanced(store, run) == 9_900


def test_a_retried_create_with_the_same_task_id_debits_once(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    first = _made(store, run, create("task_a"))
    again = run(create_confirmed(store, create("task_a")))
    assert again.outcome is REPLAY and again.task == first
    assert run(store.task_queue_depth()) == 1
    assert _balanced(store, run) == 900


def test_create_shares_the_requests_bucket_with_chat(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    assert run(store.admit(admission("c1", rpm=3))).outcome is AdmissionOutcome.ADMITTED
    assert run(create_confirmed(store, create("task_a", rpm=3))).outcome is CREATED
    assert run(create_confirmed(store, create("task_b", rpm=3))).outcome is CREATED

    limited = run(create_confirmed(store, create("task_c", rpm=3)))
    assert limited.outcome is TaskCreateOutcome.RATE_LIMITED and limited.task is None
    assert limited.rate.remaining_requests == 0
    assert 19.0 < limited.rate.retry_after_seconds <= 20.0  # one request refills in 20 s
    assert run(store.get_task("t1", "task_c")) is None
    assert run(store.admit(admission("c2", rpm=3))).outcome is AdmissionOutcome.RATE_LIMITED
    assert _balanced(store, run) == 800


def test_list_pages_newest_first_with_filters_per_tenant(store: Store, run: Run) -> None:
    caps = ["text_to_image", "text_to_music", "text_to_image", "text_to_music", "text_to_image"]
    for i, cap in enumerate(caps):
        _made(store, run, create(f"task_{i}", price=0, capability=cap))
    _made(store, run, create("other", tenant="t2", price=0))
    run(store.claim_task("w1", lease_seconds=30))  # task_0 runs

    seen, after = [], None
    while True:
        page = run(store.list_tasks("t1", limit=2, after=after))
        seen += [t.task_id for t in page.tasks]
        if not page.has_more:
            break
        after = page.tasks[-1].task_id
    assert seen == ["task_4", "task_3", "task_2", "task_1", "task_0"]

    def ids(**filters: Any) -> tuple[list[str], bool]:
        page = run(store.list_tasks("t1", **filters))
        return [t.task_id for t in page.tasks], page.has_more

    images = ids(limit=2, capability="text_to_image")
    assert images == (["task_4", "task_2"], True)
    assert ids(limit=2, capability="text_to_image", after="task_2") == (["task_0"], False)
    assert ids(limit=10, status="running") == (["task_0"], False)
    assert ids(limit=10, status="queued", capability="text_to_music") == (
        ["task_3", "task_1"],
        False,
    )
    assert ids(limit=10, status="succeeded") == ([], False)
    assert ids(limit=10, after="no-such-task") == ([], False)
    assert ids(limit=10, after="other") == ([], False)  # another tenant's id is unknown here

    assert [t.task_id for t in run(store.list_tasks("t2", limit=10)).tasks] == ["other"]
    assert (
        run(store.get_task("t2", "task_0")) is None and run(store.get_task("t1", "other")) is None
    )
    assert run(store.list_tasks("t3", limit=10)).tasks == []
    with pytest.raises(ValueError):
        run(store.list_tasks("t1", limit=0))


def test_list_finds_a_full_page_of_rare_matches(store: Store, run: Run) -> None:
    for i in range(60):
        cap = "text_to_music" if i % 20 == 0 else "text_to_image"
        _made(store, run, create(f"task_{i:02d}", price=0, capability=cap))
    page = run(store.list_tasks("t1", limit=2, capability="text_to_music"))
    assert [t.task_id for t in page.tasks] == ["task_40", "task_20"] and page.has_more
    last = run(store.list_tasks("t1", limit=2, capability="text_to_music", after="task_20"))
    assert [t.task_id for t in last.tasks] == ["task_00"] and not last.has_more


def test_claim_takes_the_oldest_queued_task_under_a_lease(store: Store, run: Run) -> None:
    for name in ("task_a", "task_b", "task_c"):
        _made(store, run, create(name, price=0))

    before = time.time()
    first = run(store.claim_task("w1", lease_seconds=30))
    assert first is not None and first.task_id == "task_a"
    assert (first.status, first.worker_id, first.attempts) == ("running", "w1", 1)
    assert first.progress.stage == "running"
    assert first.started_at is not None and before - 1 <= first.started_at <= time.time() + 1
    assert first.lease_until is not None
    assert 29 <= first.lease_until - first.started_at <= 31
    assert run(store.get_task("t1", "task_a")) == first
    assert run(store.task_queue_depth()) == 2

    second = run(store.claim_task("w2", lease_seconds=30))
    third = run(store.claim_task("w1", lease_seconds=30))
    assert (second and second.task_id, third and third.task_id) == ("task_b", "task_c")
    assert run(store.claim_task("w3", lease_seconds=30)) is None
    assert run(store.task_queue_depth()) == 0


def test_a_waiting_claim_wakes_for_a_new_task(store: Store, run: Run) -> None:
    async def scenario() -> tuple[TaskRecord | None, float, TaskRecord | None, float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        empty = await store.claim_task("w1", lease_seconds=30, wait_seconds=0.3)
        waited = loop.time() - start

        async def later() -> None:
            await asyncio.sleep(0.1)
            await create_confirmed(store, create("task_a", price=0))

        start = loop.time()
        task, _ = await asyncio.gather(
            store.claim_task("w1", lease_seconds=30, wait_seconds=5), later()
        )
        return empty, waited, task, loop.time() - start

    empty, waited, task, took = run(scenario())
    assert empty is None and 0.25 <= waited < 1.5
    assert task is not None and task.task_id == "task_a" and took < 1.0


def test_an_expired_lease_is_claimed_by_another_worker(store: Store, run: Run) -> None:
    _made(store, run, create("task_a", price=0))
    first = run(store.claim_task("w1", lease_seconds=SHORT))
    assert first is not None
    assert run(store.claim_task("w2", lease_seconds=SHORT)) is None  # lease still live

    _lapse()
    second = run(store.claim_task("w2", lease_seconds=SHORT))
    assert second is not None and second.task_id == "task_a"
    assert (second.worker_id, second.attempts, second.status) == ("w2", 2, "running")
    assert second.started_at == first.started_at

    # The first worker lost it: its touch changes nothing and tells it so.
    seen = run(store.touch_task("task_a", "w1", lease_seconds=30, progress=TaskProgress()))
    assert seen == second
    assert run(store.get_task("t1", "task_a")) == second


def test_every_task_of_a_vanished_worker_is_claimed_again(store: Store, run: Run) -> None:
    for name in ("task_a", "task_b", "task_c"):
        _made(store, run, create(name, price=0))
    for _ in range(3):
        assert run(store.claim_task("w1", lease_seconds=SHORT)) is not None

    _lapse()
    again = [run(store.claim_task("w2", lease_seconds=SHORT)) for _ in range(3)]
    assert sorted(t.task_id for t in again if t is not None) == ["task_a", "task_b", "task_c"]
    assert all(t is not None and (t.worker_id, t.attempts) == ("w2", 2) for t in again)


def test_touch_extends_the_lease_and_reports_progress(store: Store, run: Run) -> None:
    lease = 1.0
    _made(store, run, create("task_a", price=0))
    claimed = run(store.claim_task("w1", lease_seconds=lease))
    assert claimed is not None

    progress = TaskProgress(percent=42.5, stage="generating", message="2 of 4")
    ingested = {"prompt": "a red fox", "image": {"type": "artifact", "artifact_id": "art_1"}}
    time.sleep(lease / 2)
    touched = run(
        store.touch_task("task_a", "w1", lease_seconds=lease, progress=progress, input=ingested)
    )
    assert touched is not None and touched.progress == progress and touched.input == ingested
    assert touched.lease_until is not None and claimed.lease_until is not None
    assert touched.lease_until > claimed.lease_until
    assert run(store.get_task("t1", "task_a")) == touched

    time.sleep(lease / 2 + 0.1)  # past the first lease, well before the extended one
    assert run(store.claim_task("w2", lease_seconds=lease)) is None
    assert run(store.touch_task("nope", "w1", lease_seconds=lease)) is None


def test_out_of_attempts_fails_with_a_full_refund(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    _made(store, run, create("task_a", price=250))
    _made(store, run, create("task_b", price=0))
    assert run(store.claim_task("w1", lease_seconds=SHORT, max_attempts=1)) is not None
    assert _balanced(store, run) == 750

    _lapse()
    # task_a's worker vanished on its last attempt: failed and refunded; task_b comes next.
    nxt = run(store.claim_task("w2", lease_seconds=SHORT, max_attempts=1))
    assert nxt is not None and nxt.task_id == "task_b"
    failed = run(store.get_task("t1", "task_a"))
    assert failed is not None and failed.status == "failed"
    assert failed.error is not None and failed.error["code"] == "worker_lost"
    assert failed.error["retryable"] is True
    assert (failed.refunded_units, failed.progress.stage) == (250, "failed")
    assert failed.completed_at is not None and failed.attempts == 1
    refund = _entries(store, run)["refund:task_a"]
    assert (refund.kind, refund.amount_units, refund.task_id) == ("refund", 250, "task_a")
    assert _balanced(store, run) == 1000
    assert run(store.task_queue_depth()) == 0


def test_cancel_of_a_queued_task_refunds_it_once(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    _made(store, run, create("task_a", price=300))

    assert run(store.request_cancel("t2", "task_a")) is None  # invisible to another tenant
    assert run(store.request_cancel("t1", "nope")) is None
    canceled = run(store.request_cancel("t1", "task_a"))
    assert canceled is not None and canceled.status == "canceled"
    assert canceled.cancel_requested_at is not None and canceled.completed_at is not None
    assert (canceled.progress.stage, canceled.refunded_units) == ("canceled", 300)
    assert run(store.request_cancel("t1", "task_a")) == canceled  # terminal: unchanged
    assert run(store.task_queue_depth()) == 0
    assert run(store.claim_task("w1", lease_seconds=30)) is None  # skipped

    refunds = [e for e in _entries(store, run).values() if e.kind == "refund"]
    assert [(e.id, e.amount_units, e.task_id) for e in refunds] == [
        ("refund:task_a", 300, "task_a")
    ]
    assert _balanced(store, run) == 1000


def test_cancel_of_a_running_task_asks_its_worker(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    _made(store, run, create("task_a", price=300))
    run(store.claim_task("w1", lease_seconds=30))

    asked = run(store.request_cancel("t1", "task_a"))
    assert asked is not None and asked.status == "running"
    assert asked.cancel_requested_at is not None and asked.refunded_units == 0
    again = run(store.request_cancel("t1", "task_a"))
    assert again is not None and again.cancel_requested_at == asked.cancel_requested_at
    seen = run(store.touch_task("task_a", "w1", lease_seconds=30))
    assert seen is not None and seen.cancel_requested_at == asked.cancel_requested_at
    assert _balanced(store, run) == 700

    done = run(
        store.finalize_task(
            TaskFinal(task_id="task_a", status="canceled", refund_units=300, reason="canceled")
        )
    )
    assert (done.status, done.refunded_units, done.progress.stage) == ("canceled", 300, "canceled")
    assert _entries(store, run)["refund:task_a"].reason == "canceled"
    assert _balanced(store, run) == 1000


def test_finalize_is_idempotent_and_refunds_once(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    _made(store, run, create("task_a", price=300))
    run(store.claim_task("w1", lease_seconds=30))

    output = {"images": [{"artifact_id": "art_1", "format": "png", "size_bytes": 10}]}
    final = TaskFinal(
        task_id="task_a",
        status="succeeded",
        output=output,
        usage={"images": 1},
        warnings=[{"code": "partial", "message": "1 of 2 images"}],
        refund_units=100,
        reason="1 of 2 images",
    )
    done = run(store.finalize_task(final))
    assert (done.status, done.refunded_units, done.output, done.usage) == (
        "succeeded",
        100,
        output,
        {"images": 1},
    )
    assert done.warnings == [{"code": "partial", "message": "1 of 2 images"}]
    assert done.progress.percent == 100.0 and done.progress.stage == "succeeded"
    assert done.completed_at is not None and done.error is None
    assert run(store.get_task("t1", "task_a")) == done

    failed = TaskFinal(task_id="task_a", status="failed", error={"code": "x"}, refund_units=300)
    assert run(store.finalize_task(failed)) == done  # already terminal: unchanged
    assert run(store.request_cancel("t1", "task_a")) == done
    refund = _entries(store, run)["refund:task_a"]
    assert (refund.amount_units, refund.reason, refund.task_id) == (100, "1 of 2 images", "task_a")
    assert _balanced(store, run) == 800


def test_failed_task_keeps_its_error(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    _made(store, run, create("task_a", price=300))
    error = {"code": "upstream_error", "message": "boom", "retryable": True}
    done = run(
        store.finalize_task(
            TaskFinal(task_id="task_a", status="failed", error=error, refund_units=300)
        )
    )
    assert (done.status, done.error, done.progress.stage) == ("failed", error, "failed")
    assert done.progress.percent == 0.0 and run(store.task_queue_depth()) == 0
    assert _balanced(store, run) == 1000


def test_a_refund_above_the_price_is_rejected(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    queued = _made(store, run, create("task_a", price=300))
    with pytest.raises(ValueError):
        run(store.finalize_task(TaskFinal(task_id="task_a", status="failed", refund_units=301)))
    with pytest.raises(ValueError):
        run(store.finalize_task(TaskFinal(task_id="task_a", status="failed", refund_units=-1)))
    with pytest.raises(KeyError):
        run(store.finalize_task(TaskFinal(task_id="nope", status="failed")))
    assert run(store.get_task("t1", "task_a")) == queued
    assert _balanced(store, run) == 700


def test_a_running_task_succeeds_without_refund(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    _made(store, run, create("task_a", price=300))
    run(store.claim_task("w1", lease_seconds=30))
    done = run(store.finalize_task(TaskFinal(task_id="task_a", status="succeeded")))
    assert done.refunded_units == 0 and "refund:task_a" not in _entries(store, run)
    assert _balanced(store, run) == 700


# What only one backend has ------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_sqlite_leases_follow_the_injected_clock(tmp_path: Path, run: Run) -> None:
    clock = _Clock()
    store = SqliteStore(tmp_path / "g.db", clock=clock)
    run(store.open())
    try:
        task = _made(store, run, create("task_a", price=0))
        assert task.created_at == 1_000_000.0
        claimed = run(store.claim_task("w1", lease_seconds=60))
        assert claimed is not None and claimed.lease_until == 1_000_060.0
        clock.now += 59
        assert run(store.claim_task("w2", lease_seconds=60)) is None
        clock.now += 1
        again = run(store.claim_task("w2", lease_seconds=60))
        assert again is not None and (again.worker_id, again.attempts) == ("w2", 2)
    finally:
        run(store.close())


def test_sqlite_claim_wakes_on_create_not_on_its_poll(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.store.sqlite.tasks._POLL_SECONDS", 30.0)
    store = SqliteStore(tmp_path / "g.db")

    async def scenario() -> tuple[TaskRecord | None, float]:
        await store.open()
        try:
            loop = asyncio.get_running_loop()
            start = loop.time()
            waiting = asyncio.ensure_future(
                store.claim_task("w1", lease_seconds=30, wait_seconds=10)
            )
            await asyncio.sleep(0.05)
            await create_confirmed(store, create("task_a", price=0))
            return await waiting, loop.time() - start
        finally:
            await store.close()

    task, took = run(scenario())
    assert task is not None and task.task_id == "task_a" and took < 1.0


def test_a_schema_2_file_is_migrated_to_3(tmp_path: Path, run: Run) -> None:
    path = tmp_path / "g.db"
    store = SqliteStore(path)
    run(store.open())
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    run(store.close())
    old = sqlite3.connect(path, isolation_level=None)  # back to what schema 2 had
    old.executescript("DROP TABLE tasks; DROP TABLE artifacts; PRAGMA user_version = 2;")
    old.close()

    store = SqliteStore(path)
    run(store.open())
    try:
        assert _balanced(store, run) == 1000  # the data of schema 2 is kept
        _made(store, run, create("task_a", price=300))
        assert _balanced(store, run) == 700
    finally:
        run(store.close())
    check = sqlite3.connect(path)
    try:
        names = {row[0] for row in check.execute("SELECT name FROM sqlite_master")}
        assert {"tasks", "artifacts", "ledger", "idempotency"} <= names
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        check.close()


def test_redis_queue_entries_go_when_tasks_end(redis_stores: Any, run: Run) -> None:
    a: RedisStore = redis_stores()
    b: RedisStore = redis_stores()
    for name in ("task_a", "task_b", "task_c"):
        _made(a, run, create(name, price=0))

    async def both() -> list[TaskRecord | None]:
        return list(
            await asyncio.gather(
                a.claim_task("w1", lease_seconds=30), b.claim_task("w2", lease_seconds=30)
            )
        )

    claimed = run(both())
    assert sorted(t.task_id for t in claimed if t is not None) == ["task_a", "task_b"]
    run(a.request_cancel("t1", "task_c"))
    for task in claimed:
        assert task is not None
        run(b.finalize_task(TaskFinal(task_id=task.task_id, status="succeeded")))

    queue = a.keys.task_queue()
    assert run(_call(a.client.xlen(queue))) == 0
    assert run(_call(a.client.xpending(queue, "workers")))["pending"] == 0
    assert run(_call(a.client.scard(a.keys.tasks_queued()))) == 0


def test_redis_touch_keeps_the_queue_entry_fresh(redis_stores: Any, run: Run) -> None:
    """A live task's entry never looks idle, so XAUTOCLAIM passes over it."""
    store: RedisStore = redis_stores()
    _made(store, run, create("task_a", price=0))
    run(store.claim_task("w1", lease_seconds=30))
    time.sleep(0.3)
    run(store.touch_task("task_a", "w1", lease_seconds=30))

    queue = store.keys.task_queue()
    pending = run(_call(store.client.xpending_range(queue, "workers", "-", "+", 10)))
    assert len(pending) == 1 and pending[0]["consumer"] == b"w1"
    assert pending[0]["time_since_delivered"] < 200


def test_redis_waiting_claim_leaves_the_request_path_free(redis_stores: Any, run: Run) -> None:
    store: RedisStore = redis_stores()

    async def scenario() -> float:
        waiting = asyncio.ensure_future(store.claim_task("w1", lease_seconds=30, wait_seconds=2))
        await asyncio.sleep(0.1)
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(20):  # the pipeline and the pool both answer while the claim blocks
            await store.admit(admission(f"c{i}"))
            await store.wallet("t1")
        took = loop.time() - start
        await create_confirmed(store, create("task_a", price=0))
        task = await waiting
        assert task is not None and task.task_id == "task_a"
        return took

    assert run(scenario()) < 0.5


def test_redis_queue_recovers_from_a_lost_stream(redis_stores: Any, run: Run) -> None:
    store: RedisStore = redis_stores()
    _made(store, run, create("task_a", price=0))
    assert run(store.claim_task("w1", lease_seconds=30)) is not None
    run(_call(store.client.delete(store.keys.task_queue())))  # stream and group gone

    _made(store, run, create("task_b", price=0))  # a new stream, no group yet
    task = run(store.claim_task("w1", lease_seconds=30))  # makes the group again
    assert task is not None and task.task_id == "task_b"


async def _call(awaitable: Any) -> Any:
    return await awaitable
