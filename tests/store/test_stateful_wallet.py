"""A stateful model of the wallet and chat admission, run against SQLite and real Redis.

Hypothesis drives random sequences of grants and adjustments (ids repeat), chat admissions
(with and without idempotency keys, keys repeated with the same and another fingerprint, on
an API key with tight request and token limits), settlements (some twice: one charge, one
token reconcile), releases (some before a late admission, which must come back ABANDONED
having taken nothing, its release having given nothing back) and clock moves that expire
holds, in-flight records, stored replies and fences. A plain Python model says what each
step must return; after every step:

- each tenant's balance is the sum of its ledger, entry by entry as the model has it, with
  unique ids and each entry's `balance_after` the running sum;
- the held units are exactly the model's live holds (a settled, released or expired call
  holds nothing);
and at the end every admitted call is finished, nothing is held, and the balances agree.

Short form (CI): derandomized, 40 examples of up to 50 steps (about 2,000 steps) per store,
well under a minute each. Full form, one command:

    GATEWAY_STATEFUL_STEPS=10000 .venv/bin/pytest tests/store/test_stateful_wallet.py \
        tests/store/test_stateful_tasks.py -s

runs random batches until each store has executed at least 10,000 steps (figures on stderr;
see docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from gateway.store import buckets
from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    Call,
    IdempotencyClaim,
    LedgerKind,
    RateLimits,
    Release,
    Settlement,
    StoredReply,
)
from tests.store.stateful_support import (
    Backends,
    Hold,
    StatefulMachine,
    WalletModel,
    check_wallets,
    run_machine,
)

TENANTS = ("t1", "t2")
LIMITS = {
    "k-open": RateLimits(requests_per_minute=0),
    "k-tight": RateLimits(requests_per_minute=4, tokens_per_minute=1_200),
}
"""Each API key's limits: none, or tight ones (4 requests, refilled one per 15 s; 1,200 tokens,
20 per second) that calls run out of."""
SCOPES = ("s0", "s1", "s2")


def _limits(api_key_id: str) -> RateLimits:
    """The limits of a call's key, named `<key>@<tenant>` (an API key is one tenant's)."""
    return LIMITS[api_key_id.partition("@")[0]]


FINGERPRINTS = ("fa", "fb")
PICK = st.integers(min_value=0, max_value=255)
"""Which of the existing things a step picks (modulo how many there are; shrinks to the first)."""

A = AdmissionOutcome


@dataclass
class CallState:
    call: Call
    state: str
    """admitted, settled or released."""
    keep_until: float
    """Until when SQLite surely remembers the call for its one token reconcile."""
    reconciled: bool = False


@dataclass
class Record:
    """An idempotency scope's record: in flight (reply None) or completed."""

    fingerprint: str
    call_id: str
    expires_at: float
    reply: StoredReply | None = None


def _reply(call_id: str) -> StoredReply:
    return StoredReply(status=200, content_type="application/json", body=call_id.encode())


class WalletMachine(StatefulMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model = WalletModel(TENANTS)
        self.calls: dict[str, CallState] = {}
        self.records: dict[str, Record] = {}
        self.levels: dict[str, tuple[float, float, float]] = {}
        """API key -> its requests and tokens levels, and when they were saved."""
        self.fenced: dict[str, tuple[Call, float]] = {}
        """Calls released before they were admitted, and when."""

    # The model's reading of the state ------------------------------------------------------

    def record(self, scope: str) -> Record | None:
        rec = self.records.get(scope)
        if rec is not None and self.b.ttl_by_clock and rec.expires_at <= self.b.now:
            del self.records[scope]
            return None
        return rec

    def bucket_levels(self, key: str) -> tuple[float, float]:
        """Both buckets of `key` refilled to now (a bucket that is off reads 0)."""
        limits, now = _limits(key), self.b.now
        r, t, at = self.levels.get(key, (None, None, None))
        return (
            buckets.refill(r, at, limits.requests_per_minute, now),
            buckets.refill(t, at, limits.tokens_per_minute, now),
        )

    def save(self, key: str, r: float, t: float) -> None:
        if _limits(key).requests_per_minute > 0 or _limits(key).tokens_per_minute > 0:
            self.levels[key] = (r, t, self.b.now)

    def reconcile(self, state: CallState, delta: int) -> None:
        """The call's one token reconcile (its first settle; its first release, when it took
        tokens). The stores save both buckets then, as refilled to now."""
        key, tpm = state.call.api_key_id, state.call.limits.tokens_per_minute
        if not state.reconciled and tpm > 0:
            r, t = self.bucket_levels(key)
            self.save(key, r, buckets.reconcile(t, tpm, delta))
        state.reconciled = True

    def finishable(self, *states: str) -> list[CallState]:
        """Calls in `states` whose settle or release the model can tell: on SQLite, a call
        with tokens to reconcile is forgotten once it outlived its hold and lease (the
        gateway gave up on it); such calls are left to the end."""
        now = self.b.now
        return [
            c
            for c in self.calls_in(*states)
            if not self.b.ttl_by_clock
            or c.reconciled
            or c.call.limits.tokens_per_minute == 0
            or now < c.keep_until
        ]

    def make_call(
        self, tenant: str, key: str, idem: tuple[str, str] | None, lease: int = 900, tokens: int = 0
    ) -> Call:
        call_id = self.fresh("call")
        claim = None
        if idem is not None:
            scope = f"{tenant}:POST:/v1/chat/completions:{idem[0]}"
            claim = IdempotencyClaim(scope=scope, fingerprint=idem[1], lease_seconds=lease)
        return Call(
            tenant=tenant,
            api_key_id=f"{key}@{tenant}",  # a key is one tenant's
            call_id=call_id,
            request_id=f"req-{call_id}",
            limits=LIMITS[key],
            tokens_reserved=tokens,
            idempotency=claim,
        )

    def expect_admission(
        self, adm: Admission
    ) -> tuple[AdmissionOutcome, StoredReply | None, int, int]:
        """Apply `adm` to the model (docs/store.md, `admit`): the outcome, the replay, and the
        hold placed and tokens reserved (0, 0 unless admitted)."""
        call, now = adm.call, self.b.now
        key, claim = call.api_key_id, call.idempotency
        rpm, tpm = call.limits.requests_per_minute, call.limits.tokens_per_minute
        r, t = self.bucket_levels(key)
        take = 1 if rpm > 0 else 0
        if rpm > 0 and r < 1:
            return A.RATE_LIMITED, None, 0, 0
        if claim is not None and (rec := self.record(claim.scope)) is not None:
            self.save(key, r - take, t)
            if rec.fingerprint != claim.fingerprint:
                return A.KEY_REUSED, None, 0, 0
            if rec.reply is not None:
                return A.REPLAY, rec.reply, 0, 0
            return A.IN_PROGRESS, None, 0, 0
        # The wallet-bounded hold: all that is available when that is short of the hold but
        # covers its minimum, with tokens in proportion.
        hold, least = adm.hold_units, adm.min_hold_units
        available = self.model.available(call.tenant, now)
        granted, tokens = hold, call.tokens_reserved
        if hold > 0 and hold > available:
            granted = available if 0 < least < hold and least <= available else 0
            fewest = adm.min_tokens_reserved
            if granted > 0 and fewest < tokens:
                tokens = fewest + (granted - least) * (tokens - fewest) // (hold - least)
        need = min(tokens, tpm) if tpm > 0 else 0
        if tpm > 0 and t < need:
            return A.RATE_LIMITED, None, 0, 0
        if hold > 0 and granted == 0:
            self.save(key, r - take, t)
            return A.INSUFFICIENT_CREDITS, None, 0, 0
        self.save(key, r - take, t - need)
        if granted > 0:
            self.model.holds[call.call_id] = Hold(call.tenant, granted, now + adm.hold_seconds)
        if claim is not None:
            self.records[claim.scope] = Record(
                claim.fingerprint, call.call_id, now + claim.lease_seconds
            )
        keep = max(
            adm.hold_seconds if granted > 0 else 0,
            claim.lease_seconds if claim is not None else 0,
        )
        admitted = msgspec.structs.replace(call, tokens_reserved=tokens)  # as the service does
        self.calls[call.call_id] = CallState(admitted, "admitted", now + (keep or 900))
        return A.ADMITTED, None, granted, tokens

    def calls_in(self, *states: str) -> list[CallState]:
        return [c for c in self.calls.values() if c.state in states]

    # Rules ---------------------------------------------------------------------------------

    @rule(
        tenant=st.sampled_from(TENANTS),
        slot=st.integers(min_value=0, max_value=3),
        kind=st.sampled_from(["grant", "adjustment"]),
        amount=st.sampled_from([1, 700, 20_000, 250_000, -500, -30_000]),
    )
    def grant(self, tenant: str, slot: int, kind: LedgerKind, amount: int) -> None:
        self.step("grant")
        if kind == "grant":
            amount = abs(amount)
        entry_id = f"{kind}:{slot}"
        first = self.model.entries[tenant].get(entry_id)
        entry = self.run(
            self.store.grant(tenant, amount, entry_id=entry_id, reason="model", kind=kind)
        )
        if first is None:
            self.model.append(tenant, entry_id, kind, amount)
            assert entry.balance_after_units == self.model.balance(tenant)
            assert (entry.kind, entry.amount_units) == (kind, amount)
        else:  # a repeated id returns the first entry, whatever this call said
            assert (entry.kind, entry.amount_units) == first
        assert (entry.id, entry.tenant) == (entry_id, tenant)

    @rule(
        tenant=st.sampled_from(TENANTS),
        key=st.sampled_from(sorted(LIMITS)),
        hold=st.sampled_from([0, 1, 500, 5_000, 60_000]),
        least=st.sampled_from([0, 1, 300, 4_000]),
        hold_seconds=st.sampled_from([15, 60, 900]),
        idem=st.none() | st.tuples(st.sampled_from(SCOPES), st.sampled_from(FINGERPRINTS)),
        lease=st.sampled_from([60, 900]),
        tokens=st.sampled_from([0, 300, 1_500]),
    )
    def admit(
        self,
        tenant: str,
        key: str,
        hold: int,
        least: int,
        hold_seconds: int,
        idem: tuple[str, str] | None,
        lease: int,
        tokens: int,
    ) -> None:
        """An admission, wallet-bounded when `least` is above 0 and below `hold`."""
        self.step("admit")
        adm = Admission(
            call=self.make_call(tenant, key, idem, lease, tokens),
            hold_units=hold,
            hold_seconds=hold_seconds,
            min_hold_units=least,
            min_tokens_reserved=tokens // 3,
        )
        available = self.model.available(tenant, self.b.now)
        expected, reply, granted, reserved = self.expect_admission(adm)
        result = self.run(self.store.admit(adm))
        bounded = 0 < granted < hold
        self.saw(f"admit {result.outcome.value}{' bounded' if bounded else ''}")
        assert result.outcome is expected, (result.outcome, expected)
        assert result.reply == reply
        assert result.available_units == available
        assert (result.hold_units, result.tokens_reserved) == (granted, reserved)
        assert result.hold_units <= max(available, 0)  # never more than the wallet had
        if key == "k-tight":
            r, t = self.bucket_levels(adm.call.api_key_id)
            remaining = (result.rate.remaining_requests, result.rate.remaining_tokens)
            assert remaining == (max(0, math.floor(r)), max(0, math.floor(t))), result.rate

    @precondition(lambda self: self.finishable("admitted", "settled"))
    @rule(
        pick=PICK,
        charge=st.sampled_from([0, 1, 300, 5_000, 70_000]),
        used=st.sampled_from([0, 200, 2_000]),
        with_reply=st.booleans(),
        reply_ttl=st.sampled_from([300, 86_400]),
    )
    def settle(self, pick: int, charge: int, used: int, with_reply: bool, reply_ttl: int) -> None:
        """A call that ran (perhaps settled before: a retried settlement charges once and
        reconciles its tokens once)."""
        self.step("settle")
        candidates = self.finishable("admitted", "settled")
        state = candidates[pick % len(candidates)]
        call, now = state.call, self.b.now
        tpm = call.limits.tokens_per_minute
        self.reconcile(state, min(call.tokens_reserved, tpm) - used)
        reply = _reply(call.call_id) if with_reply else None
        self.model.holds.pop(call.call_id, None)
        if charge > 0:
            self.model.append(call.tenant, f"charge:{call.call_id}", "charge", -charge)
        claim = call.idempotency
        if claim is not None:
            rec = self.record(claim.scope)
            mine = rec is not None and rec.call_id == call.call_id
            if reply is not None and (rec is None or mine):  # the first completion wins
                self.records[claim.scope] = Record(
                    claim.fingerprint, call.call_id, now + reply_ttl, reply
                )
            elif reply is None and mine and rec is not None and rec.reply is None:
                del self.records[claim.scope]
        state.state = "settled"
        settlement = Settlement(
            call=call,
            charge_units=charge,
            tokens_used=used,
            reason="model",
            reply=reply,
            reply_ttl_seconds=reply_ttl,
        )
        balance = self.run(self.store.settle(settlement))
        assert balance == self.model.balance(call.tenant)

    @precondition(lambda self: self.finishable("admitted", "released"))
    @rule(pick=PICK)
    def release(self, pick: int) -> None:
        """A call that failed before it cost anything (perhaps released before): its hold,
        tokens and idempotency record go back, once."""
        self.step("release")
        candidates = self.finishable("admitted", "released")
        state = candidates[pick % len(candidates)]
        call = state.call
        if call.tokens_reserved > 0:
            self.reconcile(state, min(call.tokens_reserved, call.limits.tokens_per_minute))
        state.reconciled = True
        self.model.holds.pop(call.call_id, None)
        claim = call.idempotency
        if claim is not None:
            rec = self.record(claim.scope)
            if rec is not None and rec.call_id == call.call_id and rec.reply is None:
                del self.records[claim.scope]
        state.state = "released"
        self.run(self.store.release(Release(call=call)))

    @rule(
        tenant=st.sampled_from(TENANTS),
        key=st.sampled_from(sorted(LIMITS)),
        hold=st.sampled_from([0, 1, 5_000]),
        idem=st.none() | st.tuples(st.sampled_from(SCOPES), st.sampled_from(FINGERPRINTS)),
        tokens=st.sampled_from([0, 300]),
    )
    def release_before_a_late_admit(
        self, tenant: str, key: str, hold: int, idem: tuple[str, str] | None, tokens: int
    ) -> None:
        """The gateway gave up on an admission (outcome unknown) and released the call; the
        admission reaches the store afterwards: ABANDONED, and it takes nothing. The release
        gave nothing back either: the call had taken nothing."""
        self.step("release_before_a_late_admit")
        call = self.make_call(tenant, key, idem, tokens=tokens)
        self.run(self.store.release(Release(call=call)))
        self.fenced[call.call_id] = (call, self.b.now)
        result = self.run(self.store.admit(Admission(call=call, hold_units=hold)))
        assert result.outcome is A.ABANDONED, result

    @precondition(lambda self: self.fenced_now())
    @rule(pick=PICK, hold=st.sampled_from([0, 5_000]))
    def late_admit_again(self, pick: int, hold: int) -> None:
        self.step("late_admit_again")
        candidates = self.fenced_now()
        call = candidates[pick % len(candidates)]
        result = self.run(self.store.admit(Admission(call=call, hold_units=hold)))
        assert result.outcome is A.ABANDONED, result

    def fenced_now(self) -> list[Call]:
        """Fenced calls whose fence surely still holds."""
        now, fence = self.b.now, self.b.fence_seconds
        return [call for call, at in self.fenced.values() if now - at < fence]

    @rule(seconds=st.sampled_from([1, 14, 15, 45, 60, 400, 1_000]))
    def advance_clock(self, seconds: float) -> None:
        """Time passes: holds, in-flight records, replies and fences may end."""
        self.step("advance_clock")
        self.b.advance(seconds)
        self.model.expire(self.b.now)

    # Invariants and the end ----------------------------------------------------------------

    @invariant()
    def wallets_match(self) -> None:
        check_wallets(self, self.model)

    def teardown(self) -> None:
        """Every call finishes; then nothing is held and the balances are the model's."""
        try:
            for state in self.calls_in("admitted"):
                self.model.holds.pop(state.call.call_id, None)
                self.run(self.store.release(Release(call=state.call)))
                state.state = "released"
            check_wallets(self, self.model)
            for tenant in TENANTS:
                assert self.run(self.store.wallet(tenant)).held_units == 0
        finally:
            super().teardown()


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_the_wallet_follows_its_model(
    kind: str, request: pytest.FixtureRequest, runner: asyncio.Runner, tmp_path: Path
) -> None:
    redis_url = request.getfixturevalue("redis_url") if kind == "redis" else None
    backends = Backends(kind, runner, tmp_path, redis_url)
    machine = type(f"WalletMachine_{kind}", (WalletMachine,), {})
    figures = run_machine(machine, backends, examples=40, steps=50)
    assert figures.steps > 0
