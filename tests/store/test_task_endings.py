"""Tasks: cancel and finalize, with refunds at most once; the wallet stays the sum of its ledger.

Every test runs on SQLite and on real Redis (the `store` fixture).
"""

from __future__ import annotations

import pytest

from gateway.store.base import Store, TaskFinal
from tests.store.support import Run
from tests.store.task_support import balanced, create, ledger_by_id, made


def test_cancel_of_a_queued_task_refunds_it_once(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    made(store, run, create("task_a", price=300))

    assert run(store.request_cancel("t2", "task_a")) is None  # invisible to another tenant
    assert run(store.request_cancel("t1", "nope")) is None
    canceled = run(store.request_cancel("t1", "task_a"))
    assert canceled is not None and canceled.status == "canceled"
    assert canceled.cancel_requested_at is not None and canceled.completed_at is not None
    assert (canceled.progress.stage, canceled.refunded_units) == ("canceled", 300)
    assert run(store.request_cancel("t1", "task_a")) == canceled  # terminal: unchanged
    assert run(store.task_queue_depth()) == 0
    assert run(store.claim_task("w1", lease_seconds=30)) is None  # skipped

    refunds = [e for e in ledger_by_id(store, run).values() if e.kind == "refund"]
    assert [(e.id, e.amount_units, e.task_id) for e in refunds] == [
        ("refund:task_a", 300, "task_a")
    ]
    assert balanced(store, run) == 1000


def test_cancel_of_a_running_task_asks_its_worker(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    made(store, run, create("task_a", price=300))
    run(store.claim_task("w1", lease_seconds=30))

    asked = run(store.request_cancel("t1", "task_a"))
    assert asked is not None and asked.status == "running"
    assert asked.cancel_requested_at is not None and asked.refunded_units == 0
    again = run(store.request_cancel("t1", "task_a"))
    assert again is not None and again.cancel_requested_at == asked.cancel_requested_at
    seen = run(store.touch_task("t1", "task_a", "w1", lease_seconds=30))
    assert seen is not None and seen.cancel_requested_at == asked.cancel_requested_at
    assert balanced(store, run) == 700

    done = run(
        store.finalize_task(
            TaskFinal(
                tenant="t1",
                task_id="task_a",
                status="canceled",
                refund_units=300,
                reason="canceled",
            )
        )
    )
    assert (done.status, done.refunded_units, done.progress.stage) == ("canceled", 300, "canceled")
    assert ledger_by_id(store, run)["refund:task_a"].reason == "canceled"
    assert balanced(store, run) == 1000


def test_finalize_is_idempotent_and_refunds_once(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    made(store, run, create("task_a", price=300))
    run(store.claim_task("w1", lease_seconds=30))

    output = {"images": [{"artifact_id": "art_1", "format": "png", "size_bytes": 10}]}
    final = TaskFinal(
        tenant="t1",
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

    failed = TaskFinal(
        tenant="t1", task_id="task_a", status="failed", error={"code": "x"}, refund_units=300
    )
    assert run(store.finalize_task(failed)) == done  # already terminal: unchanged
    assert run(store.request_cancel("t1", "task_a")) == done
    refund = ledger_by_id(store, run)["refund:task_a"]
    assert (refund.amount_units, refund.reason, refund.task_id) == (100, "1 of 2 images", "task_a")
    assert balanced(store, run) == 800


def test_failed_task_keeps_its_error(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    made(store, run, create("task_a", price=300))
    error = {"code": "upstream_error", "message": "boom", "retryable": True}
    done = run(
        store.finalize_task(
            TaskFinal(tenant="t1", task_id="task_a", status="failed", error=error, refund_units=300)
        )
    )
    assert (done.status, done.error, done.progress.stage) == ("failed", error, "failed")
    assert done.progress.percent == 0.0 and run(store.task_queue_depth()) == 0
    assert balanced(store, run) == 1000


def test_a_refund_above_the_price_is_rejected(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    queued = made(store, run, create("task_a", price=300))
    with pytest.raises(ValueError):
        run(
            store.finalize_task(
                TaskFinal(tenant="t1", task_id="task_a", status="failed", refund_units=301)
            )
        )
    with pytest.raises(ValueError):
        run(
            store.finalize_task(
                TaskFinal(tenant="t1", task_id="task_a", status="failed", refund_units=-1)
            )
        )
    with pytest.raises(KeyError):
        run(store.finalize_task(TaskFinal(tenant="t1", task_id="nope", status="failed")))
    assert run(store.get_task("t1", "task_a")) == queued
    assert balanced(store, run) == 700


def test_a_running_task_succeeds_without_refund(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    made(store, run, create("task_a", price=300))
    run(store.claim_task("w1", lease_seconds=30))
    done = run(store.finalize_task(TaskFinal(tenant="t1", task_id="task_a", status="succeeded")))
    assert done.refunded_units == 0 and "refund:task_a" not in ledger_by_id(store, run)
    assert balanced(store, run) == 700
