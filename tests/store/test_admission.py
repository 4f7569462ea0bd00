"""admit / settle / release: rate buckets, token reservations, credit holds, charges."""

from __future__ import annotations

import time

from gateway.store.base import AdmissionOutcome, RateState, Store
from tests.store.support import (
    Run,
    admission,
    claim,
    refilled_since,
    release,
    seconds_since,
    settlement,
)

ADMITTED = AdmissionOutcome.ADMITTED
RATE_LIMITED = AdmissionOutcome.RATE_LIMITED
INSUFFICIENT = AdmissionOutcome.INSUFFICIENT_CREDITS


def test_exactly_n_requests_then_rate_limited(store: Store, run: Run) -> None:
    started = time.monotonic()
    results = [run(store.admit(admission(f"c{i}", rpm=5))) for i in range(6)]

    assert [r.outcome for r in results] == [ADMITTED] * 5 + [RATE_LIMITED]
    assert [r.rate.remaining_requests for r in results] == [4, 3, 2, 1, 0, 0]
    assert all(r.rate.limit_requests == 5 for r in results)
    assert results[0].rate.reset_requests_seconds == 12.0  # one request refills in 60/5 s
    assert 60.0 - seconds_since(started) - 1.0 < results[4].rate.reset_requests_seconds <= 60.0
    limited = results[5].rate
    assert 12.0 - seconds_since(started) - 1.0 < limited.retry_after_seconds <= 12.0
    assert all(r.rate.retry_after_seconds == 0 for r in results[:5])
    assert limited.limit_tokens == 0 and limited.remaining_tokens == 0  # no token limit

    # A rate-limited call takes nothing: the next one is still limited, other keys are not.
    assert run(store.admit(admission("c7", rpm=5))).outcome is RATE_LIMITED
    assert run(store.admit(admission("c8", rpm=5, api_key_id="k2"))).outcome is ADMITTED


def test_a_limit_of_zero_is_off(store: Store, run: Run) -> None:
    results = [run(store.admit(admission(f"c{i}", rpm=0, tokens=10**9))) for i in range(3)]
    assert all(r.outcome is ADMITTED for r in results)
    assert results[-1].rate == RateState(
        limit_requests=0, remaining_requests=0, reset_requests_seconds=0
    )


def test_token_limit_reserves_and_refuses_what_does_not_fit(store: Store, run: Run) -> None:
    started = time.monotonic()
    # rpm=10: the request bucket refills one in 6 s (at 1000, one in 60 ms: a loaded machine
    # would refill it between the calls and the request counts below would not compare).
    first = run(store.admit(admission("c1", rpm=10, tpm=1000, tokens=600)))
    assert first.outcome is ADMITTED
    assert (first.rate.limit_tokens, first.rate.remaining_tokens) == (1000, 400)
    assert first.rate.reset_tokens_seconds == 36.0

    second = run(store.admit(admission("c2", rpm=10, tpm=1000, tokens=600)))
    assert second.outcome is RATE_LIMITED
    # 200 tokens at 1000/60 per second, less what refilled since the first call
    assert 12.0 - seconds_since(started) - 0.1 < second.rate.retry_after_seconds <= 12.0
    assert second.rate.remaining_requests == first.rate.remaining_requests  # nothing consumed

    small = run(store.admit(admission("c3", tpm=1000, tokens=400)))
    assert small.outcome is ADMITTED
    assert 0 <= small.rate.remaining_tokens <= refilled_since(started, per_minute=1000)


def test_a_request_larger_than_the_bucket_needs_a_full_bucket(store: Store, run: Run) -> None:
    started = time.monotonic()
    big = run(store.admit(admission("c1", tpm=1000, tokens=5000)))
    assert big.outcome is ADMITTED and big.rate.remaining_tokens == 0
    again = run(store.admit(admission("c2", tpm=1000, tokens=5000)))
    assert again.outcome is RATE_LIMITED
    assert 60.0 - seconds_since(started) - 0.1 < again.rate.retry_after_seconds <= 60.0


def test_settle_reconciles_tokens_once(store: Store, run: Run) -> None:
    started = time.monotonic()
    adm = admission("c1", tpm=1000, tokens=600)
    run(store.admit(adm))
    run(store.settle(settlement(adm, used=100)))
    run(store.settle(settlement(adm, used=100)))  # no second refund (it would fill the bucket)

    probe = run(store.admit(admission("probe", tpm=1000)))
    assert 900 <= probe.rate.remaining_tokens <= 900 + refilled_since(started, per_minute=1000)


def test_usage_beyond_the_reservation_can_take_the_bucket_negative(store: Store, run: Run) -> None:
    started = time.monotonic()
    adm = admission("c1", tpm=1000, tokens=500)
    run(store.admit(adm))
    run(store.settle(settlement(adm, used=1400)))  # 500 left - 900 extra = -400

    nxt = run(store.admit(admission("c2", tpm=1000, tokens=1)))
    assert nxt.outcome is RATE_LIMITED
    assert nxt.rate.remaining_tokens == 0
    # 401 tokens at 1000/60 per second, less what refilled since the first call
    assert 24.06 - seconds_since(started) - 0.1 < nxt.rate.retry_after_seconds <= 24.1


def test_limits_lowered_clamp_the_bucket(store: Store, run: Run) -> None:
    run(store.admit(admission("c1", rpm=100)))
    lowered = run(store.admit(admission("c2", rpm=3)))
    assert lowered.outcome is ADMITTED
    assert (lowered.rate.limit_requests, lowered.rate.remaining_requests) == (3, 2)


def test_hold_blocks_a_call_the_wallet_cannot_cover(store: Store, run: Run) -> None:
    run(store.grant("t1", 100, entry_id="g1", reason="top-up"))

    first = run(store.admit(admission("c1", hold=80, rpm=10)))  # rpm=10: as above
    assert first.outcome is ADMITTED and first.available_units == 100
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (100, 80)

    refused = run(store.admit(admission("c2", hold=30, rpm=10, tpm=1000, tokens=50)))
    assert refused.outcome is INSUFFICIENT and refused.available_units == 20
    assert refused.rate.remaining_requests == first.rate.remaining_requests - 1  # 1 request used
    assert refused.rate.remaining_tokens == 1000  # no tokens taken
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (100, 80)
    assert len(run(store.ledger("t1", limit=10)).entries) == 1


def test_hold_of_zero_never_fails_even_with_a_negative_balance(store: Store, run: Run) -> None:
    run(store.grant("t1", -50, entry_id="adj", reason="debt", kind="adjustment"))
    result = run(store.admit(admission("c1", hold=0)))
    assert result.outcome is ADMITTED and result.available_units == -50


def test_settle_charges_once_even_when_called_twice(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    adm = admission("c1", hold=300)
    run(store.admit(adm))

    assert run(store.settle(settlement(adm, charge=120))) == 880
    assert run(store.settle(settlement(adm, charge=120))) == 880

    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (880, 0)
    entries = run(store.ledger("t1", limit=10)).entries
    assert [e.id for e in entries] == ["charge:c1", "g1"]
    charge = entries[0]
    assert (charge.kind, charge.amount_units, charge.balance_after_units) == ("charge", -120, 880)
    assert (charge.reason, charge.request_id) == ("chat", "req_c1")


def test_settle_may_overdraw_and_zero_charge_writes_nothing(store: Store, run: Run) -> None:
    run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
    adm = admission("c1", hold=100)
    run(store.admit(adm))
    assert run(store.settle(settlement(adm, charge=250))) == -150  # postpaid: allowed

    free = admission("c2")
    run(store.admit(free))
    assert run(store.settle(settlement(free, charge=0))) == -150
    assert len(run(store.ledger("t1", limit=10)).entries) == 2


def test_release_gives_back_hold_and_tokens_once(store: Store, run: Run) -> None:
    run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
    adm = admission("c1", hold=90, tpm=1000, tokens=700)
    assert run(store.admit(adm)).rate.remaining_tokens == 300

    run(store.release(release(adm)))
    run(store.release(release(adm)))

    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (100, 0)
    probe = run(store.admit(admission("probe", tpm=1000, hold=100)))
    assert probe.outcome is ADMITTED
    assert probe.rate.remaining_tokens == 1000  # given back, capped at capacity, not doubled


def test_a_release_fences_an_admission_that_arrives_after_it(store: Store, run: Run) -> None:
    """An admission its caller gave up on (a store timeout) may reach the store after the
    release that the caller sent for it: it must then take nothing."""
    key = claim()
    late = admission("late", tpm=1000, tokens=600, hold=500, idempotency=key)
    run(store.grant("t1", 1000, entry_id="g1", reason="test"))
    run(store.release(release(late)))

    result = run(store.admit(late))
    assert result.outcome is AdmissionOutcome.ABANDONED
    assert run(store.wallet("t1")).held_units == 0
    # Neither the tokens nor the idempotency key were taken: another call gets both.
    retry = run(store.admit(admission("retry", tpm=1000, tokens=1000, hold=500, idempotency=key)))
    assert retry.outcome is ADMITTED
    assert retry.rate.remaining_tokens == 0
