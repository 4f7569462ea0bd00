"""Cases the stateful models (test_stateful_wallet.py, test_stateful_tasks.py) found, kept as
plain contract tests on both stores."""

from __future__ import annotations

import time

from gateway.store.base import AdmissionOutcome, Store
from tests.store.support import Run, admission, refilled_since, release, settlement


def test_a_call_that_reserved_no_tokens_still_pays_for_the_tokens_it_used(
    store: Store, run: Run
) -> None:
    """settle reconciles min(reserved, capacity) - used the first time, whatever was
    reserved: a call that reserved 0 and used 2,000 takes 2,000 (the bucket goes negative).
    SQLite kept its once-only marker only for calls that reserved something, so it let such
    a call through free."""
    adm = admission("c1", tpm=1_200, tokens=0)
    assert run(store.admit(adm)).outcome is AdmissionOutcome.ADMITTED
    run(store.settle(settlement(adm, used=2_000)))
    run(store.settle(settlement(adm, used=2_000)))  # once only

    after = run(store.admit(admission("c2", tpm=1_200, tokens=300)))
    assert after.outcome is AdmissionOutcome.RATE_LIMITED
    assert after.rate.remaining_tokens == 0
    # -800 refills at 20 tokens/s: 300 fit again after 55 s, not before.
    assert 54 < after.rate.retry_after_seconds <= 55.5


def test_a_release_before_the_admission_gives_back_no_tokens(store: Store, run: Run) -> None:
    """A call released before its admission reached the store (the gateway gave up on an
    admission whose outcome it did not know) had taken nothing, so its release gives nothing
    back: the late admission is ABANDONED, and the tokens bucket is as it was."""
    started = time.monotonic()
    first = admission("c1", tpm=1_200, tokens=1_000)
    assert run(store.admit(first)).outcome is AdmissionOutcome.ADMITTED  # 200 left

    late = admission("c2", tpm=1_200, tokens=1_000)
    run(store.release(release(late)))
    assert run(store.admit(late)).outcome is AdmissionOutcome.ABANDONED

    after = run(store.admit(admission("c3", tpm=1_200, tokens=1_000)))
    assert after.outcome is AdmissionOutcome.RATE_LIMITED
    # 200, and what refilled meanwhile (20 a second); a release that gave back would make 1,200
    assert 200 <= after.rate.remaining_tokens <= 200 + refilled_since(started, per_minute=1_200)
