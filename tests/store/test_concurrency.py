"""Concurrent admissions: atomicity holds under load (one event loop, many calls in flight)."""

from __future__ import annotations

import asyncio
from collections import Counter

from gateway.store.base import Admission, AdmissionOutcome, AdmissionResult, Store
from tests.store.support import Run, admission, claim


async def _admit_all(store: Store, admissions: list[Admission]) -> list[AdmissionResult]:
    return await asyncio.gather(*(store.admit(a) for a in admissions))


def test_one_scope_admits_exactly_one_of_200(store: Store, run: Run) -> None:
    results = run(_admit_all(store, [admission(f"c{i}", idempotency=claim()) for i in range(200)]))
    outcomes = Counter(r.outcome for r in results)
    assert outcomes == {AdmissionOutcome.ADMITTED: 1, AdmissionOutcome.IN_PROGRESS: 199}


def test_holds_never_exceed_the_balance(store: Store, run: Run) -> None:
    run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
    results = run(_admit_all(store, [admission(f"c{i}", hold=30) for i in range(50)]))

    admitted = [r for r in results if r.outcome is AdmissionOutcome.ADMITTED]
    assert len(admitted) == 3
    assert all(
        r.outcome is AdmissionOutcome.INSUFFICIENT_CREDITS for r in results if r not in admitted
    )
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (100, 90)
