"""The wallet-bounded hold (`Admission.min_hold_units`): a call whose whole hold the wallet
cannot cover, but whose minimum it can, is held all that is available, in the same atomic
step, and reserves tokens in proportion; below the minimum it is refused as before. On every
backend, and under concurrent admissions (a property test): no admission is granted more than
was available, and settling every call at its whole hold never takes a wallet below zero."""

from __future__ import annotations

import asyncio
import time
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.store.base import Admission, AdmissionOutcome, AdmissionResult, Store
from gateway.store.holds import granted_tokens
from tests.store.support import (
    Run,
    admission,
    as_admitted,
    refilled_since,
    release,
    settlement,
)

ADMITTED = AdmissionOutcome.ADMITTED
INSUFFICIENT = AdmissionOutcome.INSUFFICIENT_CREDITS


def test_a_wallet_that_covers_the_whole_hold_gets_it(store: Store, run: Run) -> None:
    run(store.grant("t1", 1_000, entry_id="g1", reason="top-up"))
    result = run(
        store.admit(
            admission("c1", hold=600, min_hold=100, tpm=10_000, tokens=5_000, min_tokens=500)
        )
    )
    assert result.outcome is ADMITTED
    assert (result.hold_units, result.tokens_reserved) == (600, 5_000)
    assert run(store.wallet("t1")).held_units == 600


def test_a_wallet_short_of_the_hold_but_above_its_minimum_is_held_all_it_has(
    store: Store, run: Run
) -> None:
    run(store.grant("t1", 1_000, entry_id="g1", reason="top-up"))
    run(store.admit(admission("other", hold=400)))  # 600 left available

    adm = admission(
        "c1", hold=2_100, min_hold=100, rpm=10, tpm=10_000, tokens=4_100, min_tokens=100
    )
    result = run(store.admit(adm))

    assert result.outcome is ADMITTED
    assert result.available_units == 600
    assert result.hold_units == 600
    # tokens in proportion: 100 at the minimum hold, 4,100 at the whole; 600 is a quarter way
    assert result.tokens_reserved == 1_100
    assert result.rate.remaining_tokens == 10_000 - 1_100
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (1_000, 1_000)

    # Nothing is left for the next call, however small its minimum.
    poor = run(store.admit(admission("c2", hold=50, min_hold=1)))
    assert (poor.outcome, poor.available_units, poor.hold_units) == (INSUFFICIENT, 0, 0)


def test_a_wallet_below_the_minimum_is_refused_and_nothing_is_taken(store: Store, run: Run) -> None:
    run(store.grant("t1", 90, entry_id="g1", reason="top-up"))
    result = run(store.admit(admission("c1", hold=500, min_hold=100, rpm=10, tpm=1000, tokens=800)))
    assert result.outcome is INSUFFICIENT
    assert (result.available_units, result.hold_units, result.tokens_reserved) == (90, 0, 0)
    assert result.rate.remaining_tokens == 1000
    assert run(store.wallet("t1")).held_units == 0


def test_without_a_minimum_the_hold_is_whole_or_refused(store: Store, run: Run) -> None:
    run(store.grant("t1", 90, entry_id="g1", reason="top-up"))
    assert run(store.admit(admission("c1", hold=500))).outcome is INSUFFICIENT
    # a minimum that is not below the hold is no minimum
    assert run(store.admit(admission("c2", hold=500, min_hold=500))).outcome is INSUFFICIENT
    assert run(store.wallet("t1")).held_units == 0


def test_a_bounded_call_settles_and_releases_the_tokens_it_reserved(store: Store, run: Run) -> None:
    started = time.monotonic()
    run(store.grant("t1", 500, entry_id="g1", reason="top-up"))
    adm = admission("c1", hold=1_100, min_hold=100, tpm=10_000, tokens=9_100, min_tokens=100)
    result = run(store.admit(adm))
    assert (result.hold_units, result.tokens_reserved) == (500, 3_700)

    run(store.settle(settlement(as_admitted(adm, result), charge=450, used=1_000)))
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (50, 0)
    probe = run(store.admit(admission("probe", tpm=10_000)))
    # 3,700 reserved, 1,000 used: 2,700 given back (not the 8,100 of the whole reservation)
    assert (
        9_000 <= probe.rate.remaining_tokens <= 9_000 + refilled_since(started, per_minute=10_000)
    )

    other = admission("c2", hold=1_100, min_hold=10, tpm=10_000, tokens=1_000, min_tokens=0)
    taken = run(store.admit(other))
    assert (taken.outcome, taken.hold_units) == (ADMITTED, 50)
    run(store.release(release(as_admitted(other, taken))))
    assert run(store.wallet("t1")).held_units == 0


def test_granted_tokens_interpolate_between_the_minimum_and_the_whole() -> None:
    assert granted_tokens(1_000, 100, 1_000, 5_000, 500) == 5_000
    assert granted_tokens(1_000, 100, 100, 5_000, 500) == 500
    assert granted_tokens(1_000, 100, 550, 5_000, 500) == 2_750
    assert granted_tokens(1_000, 100, 549, 5_000, 500) == 2_745  # rounded down


_CALLS = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=5_000),  # hold
        st.integers(min_value=0, max_value=5_000),  # minimum (0, or >= hold: none)
        st.integers(min_value=0, max_value=3_000),  # tokens
    ),
    min_size=1,
    max_size=12,
)


def test_concurrent_bounded_admissions_never_overdraw(store: Store, run: Run) -> None:
    """For any balance and any holds and minimums admitted at once: every grant is at most
    what was available when it was taken (and the whole hold when that covered it), the grants
    together never exceed the balance, and charging every call its whole grant leaves the
    wallet at zero or above."""

    @settings(
        max_examples=40,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(balance=st.integers(min_value=0, max_value=20_000), calls=_CALLS)
    def check(balance: int, calls: list[tuple[int, int, int]]) -> None:
        tenant = f"t-{uuid.uuid4().hex[:12]}"
        run(store.grant(tenant, balance, entry_id="g", reason="top-up"))
        admissions = [
            admission(
                f"{tenant}-c{i}",
                tenant=tenant,
                hold=hold,
                min_hold=min_hold,
                tpm=1_000_000,
                tokens=tokens,
                min_tokens=tokens // 4,
            )
            for i, (hold, min_hold, tokens) in enumerate(calls)
        ]
        results = run(_admit_all(store, admissions))
        granted = 0
        for adm, result in zip(admissions, results, strict=True):
            hold, min_hold = adm.hold_units, adm.min_hold_units
            if result.outcome is not ADMITTED:
                assert result.outcome is INSUFFICIENT and hold > 0
                assert result.available_units < (min_hold if 0 < min_hold < hold else hold)
                continue
            assert result.hold_units <= max(result.available_units, 0) or hold == 0
            if hold <= result.available_units:
                assert result.hold_units == hold
                assert result.tokens_reserved == adm.call.tokens_reserved
            else:
                assert min_hold <= result.hold_units < hold
                assert adm.min_tokens_reserved <= result.tokens_reserved
                assert result.tokens_reserved <= adm.call.tokens_reserved
            granted += result.hold_units
        assert granted <= balance
        wallet = run(store.wallet(tenant))
        assert wallet.held_units == granted
        run(
            asyncio.gather(
                *(
                    store.settle(settlement(as_admitted(a, r), charge=r.hold_units))
                    for a, r in zip(admissions, results, strict=True)
                    if r.outcome is ADMITTED
                )
            )
        )
        wallet = run(store.wallet(tenant))
        assert wallet.held_units == 0
        assert wallet.balance_units == balance - granted >= 0

    check()


async def _admit_all(store: Store, admissions: list[Admission]) -> list[AdmissionResult]:
    return await asyncio.gather(*(store.admit(a) for a in admissions))
