"""The SQLite store's admission area: `admit`, `settle` and `release`, the request path.

`admit` is memory checks (rate buckets, leases, holds: `memory.py`) plus one read of the file
(the balance; with an idempotency claim and no live lease, the completed reply in the same
statement) and no write; a wallet-bounded hold is sized from that balance in the same step
(`gateway.store.holds`). `settle` writes one transaction only when it has something durable
(the charge, a reply to keep), the rest in memory; `release` is memory only. Nothing awaits
between a check and its update, so each step is atomic on the event loop. Every time comes
from the store's clock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from gateway.clock import Clock
from gateway.store import buckets, holds
from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    AdmissionResult,
    Release,
    Settlement,
    StoredReply,
)
from gateway.store.ledger_ids import charge_id
from gateway.store.sqlite import ops
from gateway.store.sqlite.memory import CALL_SECONDS, FENCE_SECONDS, Lease, Memory

__all__ = ["SqliteAdmissionArea"]

_T = TypeVar("_T")


class SqliteAdmissionArea:
    """The request-path operations of `SqliteStore` (a mixin: the store has the connection,
    the ephemeral memory, the sweep schedule and the clock)."""

    _clock: Clock
    _mem: Memory
    _next_sweep: float
    sweep_seconds: float

    if TYPE_CHECKING:

        def _write(self, body: Callable[[sqlite3.Connection, float], _T]) -> _T: ...
        def _read(self, body: Callable[[sqlite3.Connection], _T]) -> _T: ...
        async def _may_write(self) -> None: ...

    async def admit(self, admission: Admission) -> AdmissionResult:
        """The steps of `docs/store.md`, in memory, after one read of the file."""
        call, mem, now = admission.call, self._mem, self._clock()
        if now >= self._next_sweep:
            mem.sweep(now)
            self._next_sweep = now + self.sweep_seconds
        tenant, key_id, call_id = call.tenant, call.api_key_id, call.call_id
        limits, claim = call.limits, call.idempotency
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        r, t = mem.levels(key_id, limits, now)

        lease: Lease | None = None
        fingerprint: str | None = None
        stored: StoredReply | None = None
        if claim is not None and (lease := mem.lease(claim.scope, now)) is None:
            balance, fingerprint, stored = self._read(
                lambda conn: ops.balance_and_reply(conn, tenant, claim.scope, now)
            )
        else:
            balance = self._read(lambda conn: ops.balance(conn, tenant))
        available = balance - mem.held(tenant, now)
        hold_units, min_hold = admission.hold_units, admission.min_hold_units
        granted = holds.granted_hold(hold_units, min_hold, available)
        budget = call.budget
        over_budget = False
        if budget is not None and granted > 0:
            spent = self._read(lambda conn: ops.key_spent(conn, key_id, budget.period, now))
            room = budget.units - spent - mem.key_held(key_id, now)
            granted = holds.granted_hold(hold_units, min_hold, min(available, room))
            over_budget = granted == 0
        tokens = call.tokens_reserved
        if 0 < granted < hold_units:
            tokens = holds.granted_tokens(
                hold_units, min_hold, granted, tokens, admission.min_tokens_reserved
            )
        need = min(tokens, tpm) if tpm > 0 else 0

        def result(outcome: AdmissionOutcome, reply: StoredReply | None = None) -> AdmissionResult:
            limited = outcome is AdmissionOutcome.RATE_LIMITED
            rate = buckets.state(limits, r, t, need, limited)
            if outcome is not AdmissionOutcome.ADMITTED:
                return AdmissionResult(
                    outcome=outcome, rate=rate, reply=reply, available_units=available
                )
            return AdmissionResult(
                outcome=outcome,
                rate=rate,
                available_units=available,
                hold_units=granted,
                tokens_reserved=tokens,
            )

        if call_id in mem.fenced:
            return result(AdmissionOutcome.ABANDONED)

        if rpm > 0 and r < 1:
            return result(AdmissionOutcome.RATE_LIMITED)

        if claim is not None:
            if lease is not None:
                fingerprint = lease.fingerprint
            if fingerprint is not None:
                r -= 1 if rpm > 0 else 0
                mem.store_levels(key_id, limits, r, t, now)
                if fingerprint != claim.fingerprint:
                    return result(AdmissionOutcome.KEY_REUSED)
                if lease is None:
                    return result(AdmissionOutcome.REPLAY, stored)
                return result(AdmissionOutcome.IN_PROGRESS)

        if tpm > 0 and t < need:
            return result(AdmissionOutcome.RATE_LIMITED)

        hold_seconds = admission.hold_seconds
        if hold_units > 0 and granted == 0:
            r -= 1 if rpm > 0 else 0
            mem.store_levels(key_id, limits, r, t, now)
            if over_budget:
                return result(AdmissionOutcome.KEY_BUDGET_EXCEEDED)
            return result(AdmissionOutcome.INSUFFICIENT_CREDITS)

        r -= 1 if rpm > 0 else 0
        t -= need
        mem.store_levels(key_id, limits, r, t, now)
        keep = 0  # how long this call's marker must last; 0: it reserved nothing
        mem.last_used[key_id] = now
        if granted > 0 and hold_seconds > 0:
            mem.hold(tenant, call_id, granted, now + hold_seconds, key_id)
            keep = hold_seconds
        if claim is not None:
            mem.leases[claim.scope] = Lease(claim.fingerprint, call_id, now + claim.lease_seconds)
            keep = max(keep, claim.lease_seconds)
        if keep or need or tpm > 0:  # tpm: settle takes what it used even when need is 0
            mem.calls[call_id] = now + (keep or CALL_SECONDS)
        return result(AdmissionOutcome.ADMITTED)

    async def settle(self, settlement: Settlement) -> int:
        await self._may_write()  # before reading memory: nothing awaits after this
        s, call, mem = settlement, settlement.call, self._mem
        claim, call_id = call.idempotency, call.call_id
        keep_reply = False
        if claim is not None and s.reply is not None:
            # First completion wins: a live lease of another call owns the scope.
            owner = mem.lease(claim.scope, self._clock())
            keep_reply = owner is None or owner.call_id == call_id
        if s.charge_units > 0 or keep_reply:
            entry_id = charge_id(call_id)
            balance = self._write(lambda conn, now: ops.settle(conn, s, entry_id, keep_reply, now))
        else:
            balance = self._read(lambda conn: ops.balance(conn, call.tenant))
        # The durable part is committed: now let go of what the call took (never on failure,
        # so a settlement that raised leaves the call as it was, as one transaction would).
        mem.unhold(call.tenant, call_id)
        limits = call.limits
        tpm = limits.tokens_per_minute
        if mem.calls.pop(call_id, None) is not None and tpm > 0:
            now = self._clock()
            r, t = mem.levels(call.api_key_id, limits, now)
            t = buckets.reconcile(t, tpm, min(call.tokens_reserved, tpm) - s.tokens_used)
            mem.store_levels(call.api_key_id, limits, r, t, now)
        if claim is not None:
            mem.drop_lease(claim.scope, call_id)
        return balance

    async def release(self, release: Release) -> None:
        call, mem = release.call, self._mem
        call_id, limits = call.call_id, call.limits
        mem.unhold(call.tenant, call_id)
        tpm = limits.tokens_per_minute
        now = self._clock()
        if mem.calls.pop(call_id, None) is None:
            mem.fenced[call_id] = now + FENCE_SECONDS
        elif tpm > 0 and call.tokens_reserved > 0:
            r, t = mem.levels(call.api_key_id, limits, now)
            t = buckets.reconcile(t, tpm, min(call.tokens_reserved, tpm))
            mem.store_levels(call.api_key_id, limits, r, t, now)
        if call.idempotency is not None:
            mem.drop_lease(call.idempotency.scope, call_id)
