"""Things that end by themselves: holds, in-flight leases and stored replies (one short sleep)."""

from __future__ import annotations

import time

from gateway.store.base import AdmissionOutcome, Store, StoredReply
from tests.store.support import Run, admission, claim, settlement


def test_holds_leases_and_replies_expire(store: Store, run: Run) -> None:
    run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
    # A call that never comes back: its hold and its in-flight lease must not last.
    run(store.admit(admission("lost", hold=100, hold_seconds=1, idempotency=claim("a"))))
    # A completed call whose reply is kept for one second only.
    done = admission("done", idempotency=claim("b"))
    run(store.admit(done))
    reply = StoredReply(status=200, content_type="application/json", body=b"{}")
    run(store.settle(settlement(done, reply=reply, reply_ttl_seconds=1)))
    # A lease of one second.
    run(store.admit(admission("short", idempotency=claim("c", lease_seconds=1))))

    assert run(store.wallet("t1")).held_units == 100
    assert (
        run(store.admit(admission("x1", hold=1))).outcome is AdmissionOutcome.INSUFFICIENT_CREDITS
    )
    assert run(store.admit(admission("x2", idempotency=claim("b")))).outcome is (
        AdmissionOutcome.REPLAY
    )

    time.sleep(1.2)  # the behaviour under test: past the one-second lease and holds

    assert run(store.wallet("t1")).held_units == 0
    after = run(store.admit(admission("y1", hold=100)))
    assert after.outcome is AdmissionOutcome.ADMITTED and after.available_units == 100
    for scope in ("b", "c"):
        result = run(store.admit(admission(f"y-{scope}", idempotency=claim(scope))))
        assert result.outcome is AdmissionOutcome.ADMITTED, scope
    # Lease "a" was 900 s: still in flight although its hold is gone.
    assert run(store.admit(admission("y-a", idempotency=claim("a")))).outcome is (
        AdmissionOutcome.IN_PROGRESS
    )
