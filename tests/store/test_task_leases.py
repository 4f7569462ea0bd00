"""Tasks: the queue and its leases (claim, waiting claims, expiry, touch, attempts).

Every test runs on SQLite and on real Redis (the `store` fixture). Lease expiry uses short
leases and a short sleep on both; tests/store/test_task_backends.py moves SQLite's clock instead.
"""

from __future__ import annotations

import asyncio
import time

from gateway.store.base import Store, TaskProgress, TaskRecord
from tests.store.support import Run, create_confirmed
from tests.store.task_support import SHORT, balanced, create, lapse, ledger_by_id, made


def test_claim_takes_the_oldest_queued_task_under_a_lease(store: Store, run: Run) -> None:
    for name in ("task_a", "task_b", "task_c"):
        made(store, run, create(name, price=0))

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
            await asyncio.sleep(0.1)  # the claim is waiting before the task comes
            await create_confirmed(store, create("task_a", price=0))

        start = loop.time()
        task, _ = await asyncio.gather(
            store.claim_task("w1", lease_seconds=30, wait_seconds=5), later()
        )
        return empty, waited, task, loop.time() - start

    empty, waited, task, took = run(scenario())
    assert empty is None and 0.25 <= waited < 3.0
    # Woken by the task, not by the end of the 5 s wait (bounds for a busy machine).
    assert task is not None and task.task_id == "task_a" and took < 3.0


def test_an_expired_lease_is_claimed_by_another_worker(store: Store, run: Run) -> None:
    made(store, run, create("task_a", price=0))
    first = run(store.claim_task("w1", lease_seconds=SHORT))
    assert first is not None
    assert run(store.claim_task("w2", lease_seconds=SHORT)) is None  # lease still live

    lapse()
    second = run(store.claim_task("w2", lease_seconds=SHORT))
    assert second is not None and second.task_id == "task_a"
    assert (second.worker_id, second.attempts, second.status) == ("w2", 2, "running")
    assert second.started_at == first.started_at

    # The first worker lost it: its touch changes nothing and tells it so.
    seen = run(store.touch_task("t1", "task_a", "w1", lease_seconds=30, progress=TaskProgress()))
    assert seen == second
    assert run(store.get_task("t1", "task_a")) == second


def test_every_task_of_a_vanished_worker_is_claimed_again(store: Store, run: Run) -> None:
    for name in ("task_a", "task_b", "task_c"):
        made(store, run, create(name, price=0))
    for _ in range(3):
        assert run(store.claim_task("w1", lease_seconds=SHORT)) is not None

    lapse()
    again = [run(store.claim_task("w2", lease_seconds=SHORT)) for _ in range(3)]
    assert sorted(t.task_id for t in again if t is not None) == ["task_a", "task_b", "task_c"]
    assert all(t is not None and (t.worker_id, t.attempts) == ("w2", 2) for t in again)


def test_touch_extends_the_lease_and_reports_progress(store: Store, run: Run) -> None:
    lease = 1.0
    made(store, run, create("task_a", price=0))
    claimed = run(store.claim_task("w1", lease_seconds=lease))
    assert claimed is not None

    progress = TaskProgress(percent=42.5, stage="generating", message="2 of 4")
    ingested = {"prompt": "a red fox", "image": {"type": "artifact", "artifact_id": "art_1"}}
    time.sleep(lease / 2)  # half the lease gone when it is extended
    touched = run(
        store.touch_task(
            "t1", "task_a", "w1", lease_seconds=lease, progress=progress, input=ingested
        )
    )
    assert touched is not None and touched.progress == progress and touched.input == ingested
    assert touched.lease_until is not None and claimed.lease_until is not None
    assert touched.lease_until > claimed.lease_until
    assert run(store.get_task("t1", "task_a")) == touched

    time.sleep(lease / 2 + 0.1)  # past the first lease, well before the extended one
    assert run(store.claim_task("w2", lease_seconds=lease)) is None
    assert run(store.touch_task("t1", "nope", "w1", lease_seconds=lease)) is None


def test_out_of_attempts_fails_with_a_full_refund(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    made(store, run, create("task_a", price=250))
    made(store, run, create("task_b", price=0))
    assert run(store.claim_task("w1", lease_seconds=SHORT, max_attempts=1)) is not None
    assert balanced(store, run) == 750

    lapse()
    # task_a's worker vanished on its last attempt: failed and refunded; task_b comes next.
    nxt = run(store.claim_task("w2", lease_seconds=SHORT, max_attempts=1))
    assert nxt is not None and nxt.task_id == "task_b"
    failed = run(store.get_task("t1", "task_a"))
    assert failed is not None and failed.status == "failed"
    assert failed.error is not None and failed.error["code"] == "worker_lost"
    assert failed.error["retryable"] is True
    assert (failed.refunded_units, failed.progress.stage) == (250, "failed")
    assert failed.completed_at is not None and failed.attempts == 1
    refund = ledger_by_id(store, run)["refund:task_a"]
    assert (refund.kind, refund.amount_units, refund.task_id) == ("refund", 250, "task_a")
    assert balanced(store, run) == 1000
    assert run(store.task_queue_depth()) == 0
