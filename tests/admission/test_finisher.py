"""`CallFinisher`: settlements, releases and task create steps that the store did not take are
kept and retried.

The store is a real SqliteStore behind a switch that makes it unavailable, as a stalled store
is to the gateway (its steps raise StoreUnavailable); the end-to-end proof with a paused and a
killed Redis is tests/e2e/test_store_faults.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from gateway.admission.finisher import CallFinisher
from gateway.errors import StoreUnavailable
from gateway.store.base import TaskAbandon, TaskConfirm, TaskCreateOutcome
from gateway.store.sqlite import SqliteStore
from tests.store.support import admission, release, settlement
from tests.store.test_tasks import create
from tests.support.waiting import wait_until_async


class SwitchableStore:
    """A real store that can be made to fail its finishing steps, counting every attempt."""

    _FINISHING = frozenset({"settle", "release", "confirm_task", "abandon_task"})

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.down = False
        self.attempts = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.store, name)
        if name not in self._FINISHING:
            return target

        async def step(*args: Any) -> Any:
            self.attempts += 1
            if self.down:
                raise StoreUnavailable()
            return await target(*args)

        return step


async def _open(tmp_path: Path) -> tuple[SwitchableStore, SqliteStore]:
    store = SqliteStore(tmp_path / "gateway.db")
    await store.open()
    await store.grant("t1", 100_000, entry_id="g1", reason="test")
    return SwitchableStore(store), store


def test_a_settlement_waits_out_a_short_stall(tmp_path: Path) -> None:
    async def scenario() -> None:
        flaky, store = await _open(tmp_path)
        finisher = CallFinisher(flaky, settle_wait=5.0, retry_min=0.01)  # type: ignore[arg-type]
        adm = admission("c1", hold=500)
        await store.admit(adm)
        flaky.down = True
        asyncio.get_running_loop().call_later(0.1, lambda: setattr(flaky, "down", False))
        assert await finisher.settle(settlement(adm, charge=300)) is True
        assert flaky.attempts > 1 and finisher.pending == 0
        wallet = await store.wallet("t1")
        assert (wallet.balance_units, wallet.held_units) == (99_700, 0)
        await store.close()

    asyncio.run(scenario())


def test_a_settlement_the_store_does_not_take_is_queued_then_applied_once(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        flaky, store = await _open(tmp_path)
        finisher = CallFinisher(flaky, settle_wait=0.05, retry_min=0.01, retry_max=0.02)  # type: ignore[arg-type]
        finisher.start()
        adm = admission("c1", hold=500)
        await store.admit(adm)
        flaky.down = True
        assert await finisher.settle(settlement(adm, charge=300)) is False
        assert finisher.pending == 1
        assert (await store.wallet("t1")).balance_units == 100_000  # not charged yet
        await asyncio.sleep(0.1)  # the behaviour under test: retries while the store stays away
        assert finisher.pending == 1  # still away: still queued
        flaky.down = False
        await wait_until_async(lambda: finisher.pending == 0, seconds=5, what="nothing pending")
        wallet = await store.wallet("t1")
        assert (wallet.balance_units, wallet.held_units) == (99_700, 0)
        await finisher.retry_pending()  # nothing left to apply twice
        page = await store.ledger("t1", limit=10)
        assert [e.id for e in page.entries].count("charge:c1") == 1
        await finisher.close()
        await store.close()

    asyncio.run(scenario())


def test_releases_and_abandoned_admissions_come_back_when_the_store_does(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        flaky, store = await _open(tmp_path)
        finisher = CallFinisher(flaky, retry_min=0.01, retry_max=0.02)  # type: ignore[arg-type]
        finisher.start()
        failed = admission("failed", hold=500)
        await store.admit(failed)
        flaky.down = True
        await finisher.release(release(failed))
        unknown = admission("unknown", hold=700)
        finisher.abandon(release(unknown))  # its admission may still reach the store
        assert finisher.pending == 2
        assert (await store.wallet("t1")).held_units == 500
        flaky.down = False
        await wait_until_async(lambda: finisher.pending == 0, seconds=5, what="nothing pending")
        assert (await store.wallet("t1")).held_units == 0
        late = await store.admit(unknown)  # the abandoned admission arriving late takes nothing
        assert late.outcome.value == "abandoned"
        assert (await store.wallet("t1")).held_units == 0
        await finisher.close()
        await store.close()

    asyncio.run(scenario())


def test_a_cancelled_settlement_is_kept(tmp_path: Path) -> None:
    async def scenario() -> None:
        flaky, store = await _open(tmp_path)
        finisher = CallFinisher(flaky, settle_wait=5.0, retry_min=0.05)  # type: ignore[arg-type]
        adm = admission("c1", hold=500)
        await store.admit(adm)
        flaky.down = True
        task = asyncio.create_task(finisher.settle(settlement(adm, charge=300)))
        await asyncio.sleep(0.02)  # the settle is retrying when it is cancelled
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert finisher.pending == 1
        flaky.down = False
        assert await finisher.retry_pending() is True
        assert (await store.wallet("t1")).balance_units == 99_700
        await store.close()

    asyncio.run(scenario())


def test_task_create_steps_the_store_did_not_take_are_applied_once_it_is_back(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        flaky, store = await _open(tmp_path)
        finisher = CallFinisher(flaky, retry_min=0.01, retry_max=0.02)  # type: ignore[arg-type]
        finisher.start()
        await store.create_task(create("task_kept", price=300))
        await store.create_task(create("task_gone", price=200))
        flaky.down = True
        assert await finisher.confirm(TaskConfirm(tenant="t1", task_id="task_kept")) is None
        finisher.abandon(TaskAbandon(tenant="t1", task_id="task_gone"))
        finisher.abandon(TaskAbandon(tenant="t1", task_id="task_late"))  # its create: later
        assert finisher.pending == 3
        assert (await store.wallet("t1")).held_units == 500
        flaky.down = False
        await wait_until_async(lambda: finisher.pending == 0, seconds=5, what="nothing pending")
        wallet = await store.wallet("t1")
        assert (wallet.balance_units, wallet.held_units) == (99_700, 0)
        assert await store.get_task("t1", "task_gone") is None
        assert await store.task_queue_depth() == 1
        late = await store.create_task(create("task_late", price=100))
        assert late.outcome is TaskCreateOutcome.ABANDONED
        await finisher.close()
        await store.close()

    asyncio.run(scenario())
