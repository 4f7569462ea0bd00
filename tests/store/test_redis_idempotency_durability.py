"""An Idempotency-Key's records are as durable as the charges they guard: the in-flight record
an admission writes, and the reply a replay answers with, are answered only once the replica has
them (docs/store.md, "Idempotency and failover"). Else a failover could lose the key while its
call runs, and a retry with the same key would run, and be charged, a second time.

On a real primary and replica: the WAITs the primary runs, what the replica holds when the
store answers, and the replica paused (SIGSTOP), which stops acknowledging while the primary
still counts it, as a hung or lagging replica does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.admission.finisher import CallFinisher
from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome, StoredReply
from gateway.store.redis import RedisStore
from gateway.store.redis.pipeline import ReplicationTimeout
from tests.store.support import Run, admission, claim, release, settlement
from tests.support.redis_replicated import ReplicatedRedis
from tests.support.serial import STORE_FAULTS

pytestmark = STORE_FAULTS

REPLY = StoredReply(status=200, content_type="application/json", body=b'{"ok":1}', headers={})


@pytest.fixture
def pair(redis_binary: str, tmp_path: Path) -> Iterator[ReplicatedRedis]:
    with ReplicatedRedis.running(redis_binary, tmp_path) as replicated:
        yield replicated


@pytest.fixture
def store(pair: ReplicatedRedis, run: Run) -> Iterator[RedisStore]:
    opened = RedisStore(pair.url(), prefix="gw:")
    run(opened.open())
    try:
        run(opened.grant("t1", 1_000, entry_id="g1", reason="start"))
        yield opened
    finally:
        run(opened.close())


def test_an_in_flight_key_the_replica_does_not_have_fails_the_call_retryably(
    pair: ReplicatedRedis, store: RedisStore, run: Run
) -> None:
    key = claim()
    first = admission("c1", hold=100, idempotency=key)
    pair.pause_replica()
    with pytest.raises(StoreUnavailable) as caught:  # the first write the replica misses
        run(store.admit(first))
    assert isinstance(caught.value.__cause__, ReplicationTimeout)
    # What the chat service does with an unknown admission: 503, and the call's release queued.
    finisher = CallFinisher(store)
    finisher.abandon(release(first))
    # A call without a key writes nothing a failover could make run twice: it does not wait.
    assert run(store.admit(admission("c-plain"))).outcome is AdmissionOutcome.ADMITTED
    pair.resume_replica()
    assert run(finisher.retry_pending())  # (the finisher's background pass)

    again = admission("c2", hold=100, idempotency=key)
    assert run(store.admit(again)).outcome is AdmissionOutcome.ADMITTED
    run(store.settle(settlement(again, charge=100, reply=REPLY)))
    wallet = run(store.wallet("t1"))
    assert (wallet.balance_units, wallet.held_units) == (900, 0)  # charged once, nothing held
    charges = [e for e in run(store.ledger("t1", limit=10)).entries if e.kind == "charge"]
    assert [e.id for e in charges] == ["charge:c2"]


def test_an_idempotent_admission_and_its_replay_wait_for_the_replica(
    pair: ReplicatedRedis, store: RedisStore, run: Run
) -> None:
    key = claim()
    first = admission("c1", hold=100, idempotency=key)
    before = pair.waits()
    assert run(store.admit(first)).outcome is AdmissionOutcome.ADMITTED
    assert pair.waits() > before  # answered once the replica had it...
    with redis.Redis(port=pair.replica.port) as replica:
        record = replica.hgetall(store.keys.idempotency("t1", key.scope))
    assert record[b"call"] == b"c1"  # ...so a failover now keeps the key in flight

    run(store.settle(settlement(first, charge=100, reply=REPLY)))
    before = pair.waits()
    replayed = run(store.admit(admission("c2", idempotency=key)))
    assert (replayed.outcome, replayed.reply) == (AdmissionOutcome.REPLAY, REPLY)
    assert pair.waits() > before  # a replay is answered once the replica has the reply

    before = pair.waits()
    assert run(store.admit(admission("c3"))).outcome is AdmissionOutcome.ADMITTED
    assert pair.waits() == before  # without a key: nothing a failover could make run twice
    assert run(store.wallet("t1")).balance_units == 900


def test_the_release_of_an_idempotent_call_waits_for_the_replica(
    pair: ReplicatedRedis, store: RedisStore, run: Run
) -> None:
    """A release frees the key: lost in a failover, the in-flight record (durable) would come
    back and answer the key 409 until its lease ends."""
    key = claim()
    failed = admission("c1", hold=100, idempotency=key)
    assert run(store.admit(failed)).outcome is AdmissionOutcome.ADMITTED
    before = pair.waits()
    run(store.release(release(failed)))
    assert pair.waits() > before
    with redis.Redis(port=pair.replica.port) as replica:
        assert not replica.exists(store.keys.idempotency("t1", key.scope))

    plain = admission("c2", hold=100)
    assert run(store.admit(plain)).outcome is AdmissionOutcome.ADMITTED
    before = pair.waits()
    run(store.release(release(plain)))
    assert pair.waits() == before
    assert run(store.wallet("t1")).held_units == 0
