"""A stateful model of a key's spend, run against SQLite and real Redis on a moved clock.

Hypothesis drives keys made with budgets, chat calls admitted against them (some refused
`KEY_BUDGET_EXCEEDED`), settled at a charge up to their hold or released, task creates
confirmed and canceled (a full refund), budgets patched (another amount or period, or none),
rotations, and clock moves across day, week and month boundaries. After every step, for
every key and every period kind: `key_spent` is exactly minus the sum of the key's ledger
entries stamped in the current period; and the key's holds plus what it spent never exceed a
budget that was not lowered since its period began.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    ApiKeyRecord,
    Call,
    KeyBudget,
    KeySettings,
    RateLimits,
    Release,
    Settlement,
    TaskConfirm,
    TaskCreate,
    TaskCreateOutcome,
)
from gateway.store.periods import PERIODS, period_bounds
from tests.store.stateful_support import Backends, StatefulMachine, read_ledger, run_machine

TENANT = "t1"
PICK = st.integers(min_value=0, max_value=255)
BUDGETS = st.one_of(
    st.none(),
    st.builds(
        KeyBudget,
        units=st.sampled_from([0, 500, 1_000, 2_500]),
        period=st.sampled_from(PERIODS),
    ),
)
A = AdmissionOutcome


@dataclass
class Pending:
    call: Call
    hold: int


class KeySpendMachine(StatefulMachine):
    def __init__(self) -> None:
        super().__init__()
        self.b.advance(1_800_000_000 - self.b.now)  # 2027-01-15, a Friday
        self.run(self.store.grant(TENANT, 10**9, entry_id="g", reason="top-up"))
        self.budgets: dict[str, KeyBudget | None] = {}
        self.pending: list[Pending] = []
        self.tasks: list[str] = []
        self.secret = 0

    def _key(self, pick: int) -> str:
        keys = sorted(self.budgets)
        return keys[pick % len(keys)]

    @precondition(lambda self: len(self.budgets) < 3)
    @rule(budget=BUDGETS)
    def create_key(self, budget: KeyBudget | None) -> None:
        self.step("create_key")
        key_id = self.fresh("key_")
        settings = KeySettings(budget=budget)
        record = ApiKeyRecord(
            key_id=key_id, tenant=TENANT, created_at=self.b.now, settings=settings
        )
        self.run(self.store.create_key(record, self.fresh("hash-")))
        self.budgets[key_id] = budget

    @precondition(lambda self: self.budgets)
    @rule(pick=PICK, hold=st.sampled_from([100, 300, 700]))
    def call(self, pick: int, hold: int) -> None:
        self.step("call")
        key_id = self._key(pick)
        budget = self.budgets[key_id]
        call = Call(
            tenant=TENANT,
            api_key_id=key_id,
            call_id=self.fresh("c"),
            request_id="r",
            limits=RateLimits(requests_per_minute=0),
            budget=budget,
        )
        result = self.run(self.store.admit(Admission(call=call, hold_units=hold)))
        self.saw(result.outcome.value)
        if result.outcome is A.ADMITTED:
            self.pending.append(Pending(call, hold))
        else:
            assert result.outcome is A.KEY_BUDGET_EXCEEDED and budget is not None
            room = budget.units - self.run(self.store.key_spent(TENANT, key_id, budget.period))
            held = sum(p.hold for p in self.pending if p.call.api_key_id == key_id)
            assert hold > room - held

    @precondition(lambda self: self.pending)
    @rule(pick=PICK, share=st.sampled_from([0, 1, 2, 4]))
    def settle(self, pick: int, share: int) -> None:
        self.step("settle")
        p = self.pending.pop(pick % len(self.pending))
        charge = p.hold * share // 4
        self.run(self.store.settle(Settlement(call=p.call, charge_units=charge, reason="chat")))

    @precondition(lambda self: self.pending)
    @rule(pick=PICK)
    def release(self, pick: int) -> None:
        self.step("release")
        p = self.pending.pop(pick % len(self.pending))
        self.run(self.store.release(Release(call=p.call)))

    @precondition(lambda self: self.budgets)
    @rule(pick=PICK)
    def create_task(self, pick: int) -> None:
        self.step("create_task")
        key_id = self._key(pick)
        task_id = self.fresh("task_")
        create = TaskCreate(
            task_id=task_id,
            tenant=TENANT,
            api_key_id=key_id,
            request_id="r",
            limits=RateLimits(requests_per_minute=0),
            capability="text_to_image",
            model="m",
            resolved_model="m",
            price_units=400,
            input={},
            metadata={},
            budget=self.budgets[key_id],
        )
        result = self.run(self.store.create_task(create))
        self.saw(f"task_{result.outcome.value}")
        if result.outcome is TaskCreateOutcome.CREATED:
            self.run(self.store.confirm_task(TaskConfirm(tenant=TENANT, task_id=task_id)))
            self.tasks.append(task_id)

    @precondition(lambda self: self.tasks)
    @rule(pick=PICK)
    def cancel_task(self, pick: int) -> None:
        self.step("cancel_task")
        task_id = self.tasks.pop(pick % len(self.tasks))
        task = self.run(self.store.request_cancel(TENANT, task_id))
        assert task is not None and task.status == "canceled"

    @precondition(lambda self: self.budgets)
    @rule(pick=PICK, budget=BUDGETS)
    def patch(self, pick: int, budget: KeyBudget | None) -> None:
        self.step("patch")
        key_id = self._key(pick)
        updated = self.run(self.store.update_key(key_id, KeySettings(budget=budget)))
        assert updated is not None and updated.settings.budget == budget
        self.budgets[key_id] = budget

    @precondition(lambda self: self.budgets)
    @rule(pick=PICK)
    def rotate(self, pick: int) -> None:
        self.step("rotate")
        key_id = self._key(pick)
        new_hash = self.fresh("hash-")
        rotated = self.run(self.store.rotate_key(key_id, new_hash, "gw-x", grace_seconds=60))
        assert rotated is not None and rotated.key_id == key_id
        assert rotated.settings.budget == self.budgets[key_id]

    @precondition(lambda self: self.tasks or self.pending)
    @rule(hours=st.sampled_from([1, 7, 23, 25, 24 * 6, 24 * 17]))
    def advance_clock(self, hours: int) -> None:
        """Time passes, across period boundaries (and past every hold's 15 minutes)."""
        self.step("advance_clock")
        self.b.advance(hours * 3600)
        self.pending.clear()  # their holds expired: settling them late is another test's

    @invariant()
    def spent_is_the_ledger_of_the_period(self) -> None:
        if not self.budgets:
            return
        entries = self.run(read_ledger(self.store, TENANT))
        now = self.b.now
        for key_id in self.budgets:
            mine = [e for e in entries if e.key_id == key_id]
            for period in PERIODS:
                start, end = period_bounds(period, now)
                expected = -sum(
                    e.amount_units
                    for e in mine
                    if start <= e.created_at and (end is None or e.created_at < end)
                )
                got = self.run(self.store.key_spent(TENANT, key_id, period))
                assert got == expected, (key_id, period, got, expected)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_keys_spend_is_its_ledger_of_the_period(
    kind: str, request: pytest.FixtureRequest, runner: asyncio.Runner, tmp_path: Path
) -> None:
    redis_url = request.getfixturevalue("redis_url") if kind == "redis" else None
    backends = Backends(kind, runner, tmp_path, redis_url)
    machine = type(f"KeySpendMachine_{kind}", (KeySpendMachine,), {})
    figures = run_machine(machine, backends, examples=30, steps=40)
    assert figures.events.get("key_budget_exceeded", 0) > 0
    assert figures.events.get("task_key_budget_exceeded", 0) > 0
