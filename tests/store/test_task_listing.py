"""Task listing with every filter combination and paging, and task retention, on both stores.

A listing is compared with what `get_task` says of every task (a plain read of the record,
which no index is involved in): newest first, filtered, split into pages joined by `after`,
`has_more` true exactly when a page is not the last. Retention uses a short retention and real
time on both stores (polled with a deadline, never slept past).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from gateway.store.base import Store, TaskFinal, TaskRecord
from tests.store.listing_support import CAPABILITIES, STATUSES, all_pages, make_task
from tests.store.support import Run
from tests.support.waiting import wait_until

_FILTERS = [
    {k: v for k, v in (("status", s), ("capability", c)) if v is not None}
    for s, c in itertools.product((None, *STATUSES), (None, *CAPABILITIES, "text_to_video"))
]


def _expected(tasks: list[TaskRecord], limit: int, **filters: Any) -> list[tuple[list[str], bool]]:
    """The pages a listing should give: the tasks as `get_task` reads them, newest first."""
    ids = [
        t.task_id
        for t in sorted(tasks, key=lambda t: t.created_at, reverse=True)
        if all(getattr(t, name) == value for name, value in filters.items())
    ]
    chunks = [ids[i : i + limit] for i in range(0, len(ids), limit)] or [[]]
    return [(chunk, i < len(chunks) - 1) for i, chunk in enumerate(chunks)]


def _now(store: Store, run: Run, ids: list[str], tenant: str = "t1") -> list[TaskRecord]:
    found = [run(store.get_task(tenant, task_id)) for task_id in ids]
    return [t for t in found if t is not None]


def _mixed(store: Store, run: Run) -> list[str]:
    """24 tasks of three capabilities in every status (and another tenant's, never listed)."""
    ids = [f"task_{i:02d}" for i in range(24)]
    for i, task_id in enumerate(ids):
        run(make_task(store, task_id, capability=CAPABILITIES[(i * i + i // 5) % 3]))
    run(make_task(store, "other_0", tenant="t2", capability="text_to_music"))
    for worker in range(10):  # the ten oldest run
        assert run(store.claim_task(f"w{worker}", lease_seconds=60)) is not None
    for task_id, status in [("task_00", "succeeded"), ("task_03", "succeeded"),
                            ("task_06", "succeeded"), ("task_01", "failed"),
                            ("task_04", "failed"), ("task_12", "failed")]:  # fmt: skip
        run(store.finalize_task(TaskFinal(tenant="t1", task_id=task_id, status=status)))
    for task_id in ("task_02", "task_15", "task_20"):  # running: only asked; queued: canceled
        run(store.request_cancel("t1", task_id))
    return ids


def test_every_filter_combination_pages_like_the_records_say(store: Store, run: Run) -> None:
    ids = _mixed(store, run)
    tasks = _now(store, run, ids)
    assert {t.status for t in tasks} == set(STATUSES)  # every status is there to filter on
    for filters, limit in itertools.product(_FILTERS, (1, 3, 100)):
        assert run(all_pages(store, "t1", limit=limit, **filters)) == _expected(
            tasks, limit, **filters
        ), (filters, limit)
    assert run(all_pages(store, "t2", limit=5, capability="text_to_music")) == [
        (["other_0"], False)
    ]
    assert run(all_pages(store, "t3", limit=5, status="queued")) == [([], False)]


def test_a_page_after_an_id_of_another_filter_or_tenant(store: Store, run: Run) -> None:
    ids = _mixed(store, run)
    tasks = _now(store, run, ids)
    running = [
        t.task_id for t in sorted(tasks, key=lambda t: -t.created_at) if t.status == "running"
    ]
    # `after` is a position in the tenant's list, whatever the task's own status.
    page = run(store.list_tasks("t1", limit=2, after="task_08", status="running"))
    assert [t.task_id for t in page.tasks] == [i for i in running if i < "task_08"][:2]
    assert page.has_more
    for after in ("no_such_task", "other_0"):
        page = run(store.list_tasks("t1", limit=5, after=after, status="queued"))
        assert (page.tasks, page.has_more) == ([], False)
    with pytest.raises(ValueError):
        run(store.list_tasks("t1", limit=0, status="queued"))


def test_tasks_changing_status_between_pages(store: Store, run: Run) -> None:
    for i in range(8):
        run(make_task(store, f"task_{i}", capability="text_to_music"))

    first = run(store.list_tasks("t1", limit=3, status="queued"))
    assert [t.task_id for t in first.tasks] == ["task_7", "task_6", "task_5"] and first.has_more
    run(store.request_cancel("t1", "task_5"))  # the page's own last task leaves the filter
    run(store.request_cancel("t1", "task_3"))  # one of the next page's leaves it
    claimed = run(store.claim_task("w1", lease_seconds=60))  # the oldest starts running
    assert claimed is not None and claimed.task_id == "task_0"
    run(make_task(store, "task_8", capability="text_to_music"))  # a newer one comes in

    second = run(store.list_tasks("t1", limit=3, status="queued", after="task_5"))
    assert [t.task_id for t in second.tasks] == ["task_4", "task_2", "task_1"]
    assert not second.has_more
    canceled = run(store.list_tasks("t1", limit=1, status="canceled", capability="text_to_music"))
    assert [t.task_id for t in canceled.tasks] == ["task_5"] and canceled.has_more
    rest = run(
        store.list_tasks(
            "t1", limit=1, status="canceled", capability="text_to_music", after="task_5"
        )
    )
    assert [t.task_id for t in rest.tasks] == ["task_3"] and not rest.has_more
    newest = run(store.list_tasks("t1", limit=1, status="queued"))
    assert [t.task_id for t in newest.tasks] == ["task_8"]


def test_ended_tasks_leave_after_their_retention_and_no_page_has_a_gap(
    store: Store, run: Run
) -> None:
    run(store.sweep_tasks())  # nothing to do yet (and on Redis: no error on an empty store)
    ids = [f"task_{i:02d}" for i in range(12)]
    for i, task_id in enumerate(ids):
        run(make_task(store, task_id, capability=CAPABILITIES[i % 2]))
    store.set_task_retention(0.4)
    ended = ["task_00", "task_02", "task_03", "task_05", "task_08", "task_09", "task_10"]
    for task_id in ended:
        run(store.finalize_task(TaskFinal(tenant="t1", task_id=task_id, status="succeeded")))
    for worker in range(2):  # the two oldest still queued start running (and stay)
        assert run(store.claim_task(f"w{worker}", lease_seconds=60)) is not None

    def swept() -> bool:
        run(store.sweep_tasks(limit=2))  # bounded rounds, as the gateway's sweep runs them
        return all(run(store.get_task("t1", task_id)) is None for task_id in ended)

    wait_until(swept, what="the ended tasks are removed")
    kept = _now(store, run, ids)
    assert sorted(t.task_id for t in kept) == sorted(set(ids) - set(ended))
    assert {t.status for t in kept} == {"queued", "running"}  # never removed, however old
    # On Redis the hashes went by TTL and their index entries may still be there: a listing
    # passes over them (and drops them); the sweep drops the rest.
    for filters, limit in itertools.product(_FILTERS, (1, 2, 100)):
        assert run(all_pages(store, "t1", limit=limit, **filters)) == _expected(
            kept, limit, **filters
        ), (filters, limit)
    wait_until(lambda: run(store.sweep_tasks(limit=2)) == 0, what="nothing left to sweep")
    assert run(all_pages(store, "t1", limit=3)) == _expected(kept, 3)


def test_a_sweep_is_bounded_and_keeps_what_did_not_end(store: Store, run: Run) -> None:
    with pytest.raises(ValueError):
        store.set_task_retention(0)
    store.set_task_retention(0.2)
    for i in range(5):
        run(make_task(store, f"task_{i}"))
        run(store.finalize_task(TaskFinal(tenant="t1", task_id=f"task_{i}", status="failed")))
    run(make_task(store, "queued_0"))
    counts: list[int] = []

    def all_swept() -> bool:
        counts.append(run(store.sweep_tasks(limit=2)))
        return sum(counts) == 5

    wait_until(all_swept, what="five ended tasks swept")
    assert max(counts) == 2  # never more than the limit at once
    assert run(store.get_task("t1", "queued_0")) is not None
    page = run(store.list_tasks("t1", limit=10))
    assert [t.task_id for t in page.tasks] == ["queued_0"]
