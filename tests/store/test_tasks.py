"""Tasks: the prepaid create (rate, idempotency, debit, enqueue in one step) and the listing;
the wallet stays the sum of its ledger.

Every test runs on SQLite and on real Redis (the `store` fixture).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from gateway.store.base import AdmissionOutcome, Store, TaskCreateOutcome, TaskFinal, TaskProgress
from tests.store.support import Run, admission, create_confirmed, settlement
from tests.store.task_support import (
    CREATED,
    REPLAY,
    balanced,
    create,
    ledger_by_id,
    made,
    task_claim,
)


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

    debit = ledger_by_id(store, run)["debit:task_a"]
    assert (debit.kind, debit.amount_units, debit.balance_after_units) == ("debit", -300, 700)
    assert (debit.task_id, debit.request_id) == ("task_a", "req_task_a")
    assert balanced(store, run) == 700


def test_insufficient_credits_creates_nothing(store: Store, run: Run) -> None:
    run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
    result = run(create_confirmed(store, create("task_a", price=150)))

    assert result.outcome is TaskCreateOutcome.INSUFFICIENT_CREDITS
    assert result.task is None and result.available_units == 100
    assert result.rate.remaining_requests == 999  # it took one request
    assert run(store.get_task("t1", "task_a")) is None
    assert run(store.list_tasks("t1", limit=10)).tasks == []
    assert run(store.task_queue_depth()) == 0
    assert list(ledger_by_id(store, run)) == ["g1"]
    assert balanced(store, run) == 100


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
    run(
        store.finalize_task(
            TaskFinal(tenant="t1", task_id="task_b", status="failed", refund_units=20)
        )
    )
    assert balanced(store, run) == 50
    assert run(store.wallet("t1")).held_units == 0


def test_a_price_of_zero_never_fails(store: Store, run: Run) -> None:
    run(store.grant("t1", -10, entry_id="adj", reason="debt", kind="adjustment"))
    result = run(create_confirmed(store, create("task_a", price=0)))
    assert result.outcome is CREATED and result.available_units == -10
    assert list(ledger_by_id(store, run)) == ["adj"]  # nothing to debit, no entry
    assert balanced(store, run) == -10


def test_idempotent_create_replays_the_task_and_debits_once(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    # rpm=10: one request refills in 6 s (at 1000, in 60 ms: a loaded machine refilled one
    # between the two creates and the count below did not compare).
    first = made(store, run, create("task_a", idempotency=task_claim(), rpm=10))

    again = run(create_confirmed(store, create("task_b", idempotency=task_claim(), rpm=10)))
    assert again.outcome is REPLAY and again.task == first
    assert again.rate.remaining_requests == 8  # a replay takes a request
    reused = run(create_confirmed(store, create("task_c", idempotency=task_claim("fp-b"))))
    assert reused.outcome is TaskCreateOutcome.KEY_REUSED and reused.task is None

    # A replay shows the task as it is now.
    run(store.claim_task("w1", lease_seconds=30))
    later = run(create_confirmed(store, create("task_d", idempotency=task_claim())))
    assert later.task is not None and later.task.status == "running"

    assert run(store.get_task("t1", "task_b")) is None
    assert [t.task_id for t in run(store.list_tasks("t1", limit=10)).tasks] == ["task_a"]
    assert [e for e in ledger_by_id(store, run) if e.startswith("debit:")] == ["debit:task_a"]
    assert balanced(store, run) == 900


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
    assert len([e for e in ledger_by_id(store, run) if e.startswith("debit:")]) == 1
    assert balanced(store, run) == 9_900


def test_a_retried_create_with_the_same_task_id_debits_once(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    first = made(store, run, create("task_a"))
    again = run(create_confirmed(store, create("task_a")))
    assert again.outcome is REPLAY and again.task == first
    assert run(store.task_queue_depth()) == 1
    assert balanced(store, run) == 900


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
    assert balanced(store, run) == 800


def test_list_pages_newest_first_with_filters_per_tenant(store: Store, run: Run) -> None:
    caps = ["text_to_image", "text_to_music", "text_to_image", "text_to_music", "text_to_image"]
    for i, cap in enumerate(caps):
        made(store, run, create(f"task_{i}", price=0, capability=cap))
    made(store, run, create("other", tenant="t2", price=0))
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
        made(store, run, create(f"task_{i:02d}", price=0, capability=cap))
    page = run(store.list_tasks("t1", limit=2, capability="text_to_music"))
    assert [t.task_id for t in page.tasks] == ["task_40", "task_20"] and page.has_more
    last = run(store.list_tasks("t1", limit=2, capability="text_to_music", after="task_20"))
    assert [t.task_id for t in last.tasks] == ["task_00"] and not last.has_more
