"""Idempotency reservations: in progress, replay of the stored reply, key reuse, release."""

from __future__ import annotations

from gateway.store.base import AdmissionOutcome, Store, StoredReply
from tests.store.support import Run, admission, claim, release, settlement

SSE_BODY = (
    b'data: {"id":"chatcmpl_1","choices":[{"delta":{"content":"Hel"}}]}\n\n'
    b'data: {"id":"chatcmpl_1","choices":[{"delta":{"content":"lo"}}]}\n\n'
    b"data: [DONE]\n\n"
)


def test_second_call_with_the_same_key_is_in_progress(store: Store, run: Run) -> None:
    # rpm=10: one request refills in 6 s (at 1000, in 60 ms: a loaded machine refilled one
    # between these calls and the counts below did not compare).
    first = run(store.admit(admission("c1", rpm=10, idempotency=claim())))
    again = run(store.admit(admission("c2", rpm=10, idempotency=claim())))
    other_body = run(store.admit(admission("c3", rpm=10, idempotency=claim(fingerprint="fp-b"))))

    assert first.outcome is AdmissionOutcome.ADMITTED
    assert again.outcome is AdmissionOutcome.IN_PROGRESS
    assert other_body.outcome is AdmissionOutcome.KEY_REUSED
    # Each of them still counts as a request.
    assert [r.rate.remaining_requests for r in (first, again, other_body)] == [9, 8, 7]


def test_completed_call_replays_the_stored_stream(store: Store, run: Run) -> None:
    run(store.grant("t1", 1000, entry_id="g1", reason="top-up"))
    adm = admission("c1", hold=100, tpm=1000, tokens=50, idempotency=claim())
    run(store.admit(adm))
    reply = StoredReply(
        status=200,
        content_type="text/event-stream",
        body=SSE_BODY,
        headers={"x-request-id": "req_c1", "openai-model": "sim-fast"},
    )
    run(store.settle(settlement(adm, charge=40, used=30, reply=reply)))

    replay = run(store.admit(admission("c2", hold=100, tpm=1000, tokens=50, idempotency=claim())))
    assert replay.outcome is AdmissionOutcome.REPLAY
    assert replay.reply == reply and replay.reply is not None
    assert replay.reply.body == SSE_BODY
    # A replay charges nothing and holds nothing.
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (960, 0)

    reused = run(store.admit(admission("c3", idempotency=claim(fingerprint="fp-b"))))
    assert reused.outcome is AdmissionOutcome.KEY_REUSED and reused.reply is None


def test_release_frees_the_key_for_a_retry(store: Store, run: Run) -> None:
    adm = admission("c1", idempotency=claim())
    run(store.admit(adm))
    run(store.release(release(adm)))

    retry = admission("c2", idempotency=claim())
    assert run(store.admit(retry)).outcome is AdmissionOutcome.ADMITTED
    # A late release of the first call must not free the retry's reservation.
    run(store.release(release(adm)))
    assert run(store.admit(admission("c3", idempotency=claim()))).outcome is (
        AdmissionOutcome.IN_PROGRESS
    )


def test_settle_without_a_reply_frees_the_key(store: Store, run: Run) -> None:
    adm = admission("c1", idempotency=claim())
    run(store.admit(adm))
    run(store.settle(settlement(adm, charge=0)))
    assert run(store.admit(admission("c2", idempotency=claim()))).outcome is (
        AdmissionOutcome.ADMITTED
    )


def test_scopes_are_independent(store: Store, run: Run) -> None:
    run(store.admit(admission("c1", idempotency=claim("scope-a"))))
    assert run(store.admit(admission("c2", idempotency=claim("scope-b")))).outcome is (
        AdmissionOutcome.ADMITTED
    )
