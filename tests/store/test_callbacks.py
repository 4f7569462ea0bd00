"""Task callbacks in the store: the delivery is scheduled by the step that ends the task, claimed
under a lease (never twice at once), and an attempt's outcome applies only under its lease.

Every test runs on SQLite, on one real Redis and on a real Redis Cluster (the `store` fixture).
"""

from __future__ import annotations

import asyncio
import time

import msgspec

from gateway.store.base import CallbackAttempt, Store, TaskCallback, TaskFinal, TaskRecord
from tests.store.support import Run
from tests.store.task_support import SHORT, create, lapse, made

URL = "https://hooks.example.com/in"


def made_with_callback(store: Store, run: Run, task_id: str, tenant: str = "t1") -> TaskRecord:
    run(store.grant(tenant, 10_000, entry_id=f"g-{task_id}", reason="top-up"))
    c = msgspec.structs.replace(
        create(task_id, tenant=tenant),
        callback=TaskCallback(url=URL, callback_id=f"cb_{task_id}"),
    )
    return made(store, run, c)


def finalize(store: Store, run: Run, task_id: str, tenant: str = "t1") -> TaskRecord:
    run(store.claim_task("w1", lease_seconds=30))
    return run(store.finalize_task(TaskFinal(tenant=tenant, task_id=task_id, status="succeeded")))


def attempt(task: TaskRecord, status: str, **fields: object) -> CallbackAttempt:
    assert task.callback is not None and task.callback.lease_token is not None
    return CallbackAttempt(
        tenant=task.tenant,
        task_id=task.task_id,
        lease_token=task.callback.lease_token,
        status=status,  # type: ignore[arg-type]
        **fields,  # type: ignore[arg-type]
    )


def test_a_callback_is_kept_with_its_task_and_not_due_before_the_task_ends(
    store: Store, run: Run
) -> None:
    task = made_with_callback(store, run, "task_a")
    assert task.callback == TaskCallback(url=URL, callback_id="cb_task_a")
    read = run(store.get_task("t1", "task_a"))
    assert read is not None and read.callback == task.callback
    assert run(store.claim_callbacks(lease_seconds=30, limit=10)) == []
    assert run(store.callback_backlog()) == 0


def test_finalize_schedules_the_delivery_and_a_claim_holds_it(store: Store, run: Run) -> None:
    made_with_callback(store, run, "task_a")
    before = time.time()
    done = finalize(store, run, "task_a")
    assert done.callback is not None and done.callback.status == "pending"
    assert done.callback.next_attempt_at is not None
    assert done.callback.next_attempt_at >= before - 1
    assert run(store.callback_backlog()) == 1

    claimed = run(store.claim_callbacks(lease_seconds=30, limit=10))
    assert [t.task_id for t in claimed] == ["task_a"]
    assert claimed[0].status == "succeeded" and claimed[0].callback is not None
    assert claimed[0].callback.lease_token
    assert run(store.claim_callbacks(lease_seconds=30, limit=10)) == []  # under its lease

    delivered = run(store.record_callback_attempt(attempt(claimed[0], "delivered")))
    assert delivered is not None and delivered.callback is not None
    cb = delivered.callback
    assert (cb.status, cb.attempt_count, cb.last_error, cb.next_attempt_at) == (
        "delivered",
        1,
        None,
        None,
    )
    assert cb.delivered_at is not None and cb.lease_token is None
    assert run(store.get_task("t1", "task_a")) == delivered
    assert run(store.callback_backlog()) == 0
    assert run(store.claim_callbacks(lease_seconds=30, limit=10)) == []


def test_cancel_and_running_out_of_attempts_schedule_the_delivery(store: Store, run: Run) -> None:
    made_with_callback(store, run, "task_a")
    canceled = run(store.request_cancel("t1", "task_a"))
    assert canceled is not None and canceled.status == "canceled"
    assert canceled.callback is not None and canceled.callback.status == "pending"

    made_with_callback(store, run, "task_b")
    assert run(store.claim_task("w1", lease_seconds=30, max_attempts=0)) is None  # failed
    lost = run(store.get_task("t1", "task_b"))
    assert lost is not None and lost.status == "failed"
    assert lost.callback is not None and lost.callback.next_attempt_at is not None

    claimed = run(store.claim_callbacks(lease_seconds=30, limit=10))
    assert sorted(t.task_id for t in claimed) == ["task_a", "task_b"]


def test_a_task_without_a_callback_schedules_nothing(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    made(store, run, create("task_a"))
    done = finalize(store, run, "task_a")
    assert done.callback is None
    assert run(store.claim_callbacks(lease_seconds=30, limit=10)) == []
    assert run(store.redeliver_callback("t1", "task_a")) == done


def test_a_retry_is_due_at_its_time_and_a_stale_lease_changes_nothing(
    store: Store, run: Run
) -> None:
    made_with_callback(store, run, "task_a")
    finalize(store, run, "task_a")
    first = run(store.claim_callbacks(lease_seconds=30, limit=10))[0]
    later = time.time() + 3600
    retrying = run(
        store.record_callback_attempt(
            attempt(first, "retrying", next_attempt_at=later, last_error="HTTP 500")
        )
    )
    assert retrying is not None and retrying.callback is not None
    cb = retrying.callback
    assert (cb.status, cb.attempt_count, cb.last_error) == ("retrying", 1, "HTTP 500")
    assert cb.next_attempt_at is not None and abs(cb.next_attempt_at - later) < 0.01
    assert run(store.claim_callbacks(lease_seconds=30, limit=10)) == []  # not due yet
    assert run(store.callback_backlog()) == 1
    # The same lease cannot record twice.
    assert run(store.record_callback_attempt(attempt(first, "delivered"))) is None
    assert run(store.get_task("t1", "task_a")) == retrying

    # Due now (a redelivery asks for it), claimed again under a new lease.
    run(store.redeliver_callback("t1", "task_a"))
    second = run(store.claim_callbacks(lease_seconds=30, limit=10))[0]
    assert second.callback is not None and first.callback is not None
    assert second.callback.lease_token != first.callback.lease_token
    assert second.callback.callback_id == "cb_task_a"


def test_a_lease_that_ran_out_is_claimed_again_and_the_old_one_is_refused(
    store: Store, run: Run
) -> None:
    made_with_callback(store, run, "task_a")
    finalize(store, run, "task_a")
    first = run(store.claim_callbacks(lease_seconds=SHORT, limit=10))[0]
    assert run(store.redeliver_callback("t1", "task_a")) is not None  # under way: unchanged
    assert run(store.claim_callbacks(lease_seconds=SHORT, limit=10)) == []
    lapse()
    second = run(store.claim_callbacks(lease_seconds=30, limit=10))
    assert [t.task_id for t in second] == ["task_a"]
    assert run(store.record_callback_attempt(attempt(first, "delivered"))) is None
    done = run(store.record_callback_attempt(attempt(second[0], "delivered")))
    assert done is not None and done.callback is not None
    assert (done.callback.status, done.callback.attempt_count) == ("delivered", 1)


def test_concurrent_claims_take_each_delivery_once(store: Store, run: Run) -> None:
    for n in range(6):
        made_with_callback(store, run, f"task_{n}")
        finalize(store, run, f"task_{n}")

    async def claims() -> list[list[TaskRecord]]:
        return await asyncio.gather(
            *(store.claim_callbacks(lease_seconds=30, limit=2) for _ in range(8))
        )

    taken = [t.task_id for batch in run(claims()) for t in batch]
    assert sorted(taken) == [f"task_{n}" for n in range(6)]


def test_failed_and_disabled_are_listed_and_a_redelivery_is_one_attempt(
    store: Store, run: Run
) -> None:
    for task_id in ("task_a", "task_b"):
        made_with_callback(store, run, task_id)
        finalize(store, run, task_id)
    claimed = {t.task_id: t for t in run(store.claim_callbacks(lease_seconds=30, limit=10))}
    run(store.record_callback_attempt(attempt(claimed["task_a"], "failed", last_error="x")))
    time.sleep(0.01)
    run(store.record_callback_attempt(attempt(claimed["task_b"], "disabled", last_error="410")))
    listed = run(store.failed_callbacks(limit=10))
    assert [t.task_id for t in listed] == ["task_b", "task_a"]
    assert [t.callback.status for t in listed if t.callback] == ["disabled", "failed"]
    assert run(store.callback_backlog()) == 0

    again = run(store.redeliver_callback("t1", "task_a"))
    assert again is not None and again.callback is not None
    assert (again.callback.status, again.callback.attempt_count) == ("pending", 1)
    assert [t.task_id for t in run(store.failed_callbacks(limit=10))] == ["task_b"]
    assert run(store.redeliver_callback("t2", "task_a")) is None  # another tenant's
    retried = run(store.claim_callbacks(lease_seconds=30, limit=10))
    assert [t.task_id for t in retried] == ["task_a"]
    # A redelivery's failure is final, whatever the schedule would say.
    final = run(
        store.record_callback_attempt(
            attempt(retried[0], "retrying", next_attempt_at=time.time(), last_error="HTTP 503")
        )
    )
    assert final is not None and final.callback is not None
    assert (final.callback.status, final.callback.attempt_count) == ("failed", 2)
    assert run(store.claim_callbacks(lease_seconds=30, limit=10)) == []


def test_a_tenant_secret_is_made_once_and_rotation_keeps_the_previous(
    store: Store, run: Run
) -> None:
    assert run(store.callback_secrets("t1")) is None
    first = run(store.ensure_callback_secret("t1", "whsec_a"))
    assert (first.secret, first.previous) == ("whsec_a", None)
    assert run(store.ensure_callback_secret("t1", "whsec_b")).secret == "whsec_a"
    rotated = run(store.rotate_callback_secret("t1", "whsec_c", grace_seconds=86_400))
    assert (rotated.secret, rotated.previous) == ("whsec_c", "whsec_a")
    assert rotated.previous_until is not None
    assert abs(rotated.previous_until - (rotated.created_at + 86_400)) < 1
    assert run(store.callback_secrets("t1")) == rotated
    assert run(store.callback_secrets("t2")) is None
