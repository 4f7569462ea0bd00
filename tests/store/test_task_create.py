"""A task create's two steps: `create_task` (held, unconfirmed), then `confirm_task` (debited,
queued) or `abandon_task` (gone whole, the id fenced), on SQLite and real Redis.

What the gateway relies on: until it is confirmed, a task costs nothing but a hold, no worker
can claim it, and an abandon removes every trace of it, including when the abandon arrives
before the create it undoes (a command a stalled Redis runs after the gateway gave up on it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gateway.store.base import (
    IdempotencyClaim,
    Store,
    TaskAbandon,
    TaskConfirm,
    TaskCreateOutcome,
    TaskFinal,
)
from gateway.store.sqlite import SqliteStore
from tests.store.support import Run, claim
from tests.store.test_tasks import create
from tests.support.clock import Clock

CREATED = TaskCreateOutcome.CREATED
SCOPE = "t1:POST:/v1/images/generations:key-1"


def _claim(fingerprint: str = "fp-a") -> IdempotencyClaim:
    return claim(SCOPE, fingerprint)


def _ledger_ids(store: Store, run: Run) -> list[str]:
    return [e.id for e in run(store.ledger("t1", limit=100)).entries]


def _confirm(store: Store, run: Run, task_id: str, tenant: str = "t1") -> object:
    return run(store.confirm_task(TaskConfirm(tenant=tenant, task_id=task_id)))


def _abandon(store: Store, run: Run, task_id: str, scope: str = "") -> None:
    run(store.abandon_task(TaskAbandon(tenant="t1", task_id=task_id, idempotency_scope=scope)))


def test_an_unconfirmed_task_is_held_not_charged_and_not_claimable(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    result = run(store.create_task(create("task_a", price=300)))
    assert result.outcome is CREATED and result.task is not None
    assert result.task.status == "queued"  # as a client would see it

    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (1000, 300)
    assert _ledger_ids(store, run) == ["g1"]
    assert run(store.task_queue_depth()) == 0
    assert run(store.claim_task("w1", lease_seconds=30)) is None
    # The hold counts: a second task that would need the same credits is refused.
    refused = run(store.create_task(create("task_b", price=800)))
    assert refused.outcome is TaskCreateOutcome.INSUFFICIENT_CREDITS
    assert refused.available_units == 700


def test_a_task_is_listed_once_confirmed(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    run(store.create_task(create("task_a", price=300)))
    run(store.create_task(create("task_b", price=300)))

    def listed(**filters: str) -> list[str]:
        return [t.task_id for t in run(store.list_tasks("t1", limit=10, **filters)).tasks]

    every_filter = ({}, {"capability": "text_to_image"}, {"status": "queued"})
    assert [listed(**f) for f in every_filter] == [[], [], []]
    _confirm(store, run, "task_a")
    assert [listed(**f) for f in every_filter] == [["task_a"]] * 3
    assert listed(status="queued", capability="text_to_image") == ["task_a"]
    run(store.request_cancel("t1", "task_b"))  # canceled unconfirmed: listed as it ended
    assert listed() == ["task_b", "task_a"] and listed(status="canceled") == ["task_b"]


def test_confirm_turns_the_hold_into_one_debit_and_queues_the_task(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    run(store.create_task(create("task_a", price=300)))

    task = _confirm(store, run, "task_a")
    assert task is not None and task == run(store.get_task("t1", "task_a"))
    again = _confirm(store, run, "task_a")  # a repeated confirm changes nothing
    assert again == task

    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (700, 0)
    debit = run(store.ledger_entry("t1", "debit:task_a"))
    assert debit is not None and (debit.amount_units, debit.request_id) == (-300, "req_task_a")
    assert _ledger_ids(store, run) == ["debit:task_a", "g1"]
    assert run(store.task_queue_depth()) == 1
    claimed = run(store.claim_task("w1", lease_seconds=30))
    assert claimed is not None and claimed.task_id == "task_a"


def test_confirm_of_an_unknown_or_another_tenants_task_is_none(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    run(store.create_task(create("task_a", price=300)))
    assert _confirm(store, run, "task_zzz") is None
    assert _confirm(store, run, "task_a", tenant="t2") is None
    assert _ledger_ids(store, run) == ["g1"]  # still only held
    assert run(store.wallet("t1")).held_units == 300


def test_abandon_removes_an_unconfirmed_task_whole(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    run(store.create_task(create("task_a", price=300, idempotency=_claim())))

    _abandon(store, run, "task_a", SCOPE)

    assert run(store.get_task("t1", "task_a")) is None
    assert run(store.list_tasks("t1", limit=10)).tasks == []
    by_capability = run(store.list_tasks("t1", limit=10, capability="text_to_image"))
    assert by_capability.tasks == []
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (1000, 0)
    assert _ledger_ids(store, run) == ["g1"]
    assert _confirm(store, run, "task_a") is None  # a late confirm finds nothing
    # The key is free again: a retry with it creates a new task.
    retry = run(store.create_task(create("task_b", price=300, idempotency=_claim())))
    assert retry.outcome is CREATED and retry.task is not None
    assert retry.task.task_id == "task_b"


def test_an_abandon_that_arrives_first_fences_the_create(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    _abandon(store, run, "task_a", SCOPE)

    late = run(store.create_task(create("task_a", price=300, idempotency=_claim())))

    assert late.outcome is TaskCreateOutcome.ABANDONED and late.task is None
    assert run(store.get_task("t1", "task_a")) is None
    assert run(store.wallet("t1")).held_units == 0
    assert _ledger_ids(store, run) == ["g1"]
    fresh = run(store.create_task(create("task_b", price=300, idempotency=_claim())))
    assert fresh.outcome is CREATED  # the late create left no idempotency record either


def test_abandon_keeps_a_confirmed_task(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    run(store.create_task(create("task_a", price=300)))
    confirmed = _confirm(store, run, "task_a")

    _abandon(store, run, "task_a")

    assert run(store.get_task("t1", "task_a")) == confirmed
    assert run(store.wallet("t1")).balance_units == 700


def test_a_duplicate_of_an_unconfirmed_create_is_in_progress(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    run(store.create_task(create("task_a", idempotency=_claim())))

    during = run(store.create_task(create("task_b", idempotency=_claim())))
    assert during.outcome is TaskCreateOutcome.IN_PROGRESS and during.task is None
    _confirm(store, run, "task_a")
    after = run(store.create_task(create("task_c", idempotency=_claim())))
    assert after.outcome is TaskCreateOutcome.REPLAY
    assert after.task is not None and after.task.task_id == "task_a"
    assert run(store.get_task("t1", "task_b")) is None
    assert _ledger_ids(store, run) == ["debit:task_a", "g1"]


def test_cancel_of_an_unconfirmed_task_charges_and_refunds_nothing(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    run(store.create_task(create("task_a", price=300)))

    canceled = run(store.request_cancel("t1", "task_a"))
    assert canceled is not None and canceled.status == "canceled"
    assert (canceled.price_units, canceled.refunded_units) == (0, 0)
    assert _confirm(store, run, "task_a") == canceled  # a late confirm changes nothing
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (1000, 0)
    assert _ledger_ids(store, run) == ["g1"]
    assert run(store.task_queue_depth()) == 0


def test_an_unconfirmed_task_cannot_be_finalized(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    run(store.create_task(create("task_a", price=300)))
    with pytest.raises(ValueError, match="never confirmed"):
        run(
            store.finalize_task(
                TaskFinal(tenant="t1", task_id="task_a", status="failed", refund_units=300)
            )
        )
    assert _ledger_ids(store, run) == ["g1"]


def test_abandon_unconfirmed_sweeps_what_a_dead_gateway_left(
    store: Store, run: Run, tmp_path: Path
) -> None:
    clock = Clock(time.time())
    if isinstance(store, SqliteStore):  # the same file, on a clock the test moves
        run(store.close())
        store = SqliteStore(tmp_path / "gateway.db", clock=clock)
        run(store.open())
    try:
        run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
        run(store.create_task(create("task_old", price=100, idempotency=_claim())))
        run(store.create_task(create("task_done", price=100)))
        _confirm(store, run, "task_done")

        # Nothing is that old yet; then everything unconfirmed is.
        assert run(store.abandon_unconfirmed(older_than=3600)) == 0
        clock.advance(3601)
        older_than = 3600 if isinstance(store, SqliteStore) else 0  # (Redis: its own time)
        assert run(store.abandon_unconfirmed(older_than=older_than)) == 1

        assert run(store.get_task("t1", "task_old")) is None
        assert run(store.get_task("t1", "task_done")) is not None
        assert run(store.wallet("t1")).held_units == 0
        assert run(store.abandon_unconfirmed(older_than=0)) == 0
        retry = run(store.create_task(create("task_new", idempotency=_claim())))
        assert retry.outcome is CREATED  # its idempotency record went with it
    finally:
        if isinstance(store, SqliteStore):
            run(store.close())
