"""The SQLite store's ephemeral state, kept in the serving process's memory.

Rate buckets, credit holds, in-flight idempotency leases and the per-call "reconciled once"
markers all end by themselves (a bucket refills, a hold or lease expires, a marker is only
needed while its call runs). Writing them to the file cost most of each request's pages and
most of its CPU (each commit writes every touched page to the WAL), for nothing a crash would
not give up anyway: losing them is the same as their expiry, which the store's semantics
already allow (a dead call's hold is released, a dead request's key freed, limits restart).

Everything here is plain dicts changed without an `await` in between, so each check-and-update
is atomic on the process's one event loop. That is also why the SQLite store serves ONE
gateway process: another process on the same file does not see these (use Redis for replicas).

Memory stays bounded: settle and release pop what a call took, and `sweep` drops whatever
expired (holds and leases of calls that never came back, markers of lost calls, buckets that
are full again, which read the same as absent ones).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from gateway.config.limits import RateLimits
from gateway.store import buckets

__all__ = ["CALL_SECONDS", "FENCE_SECONDS", "Lease", "Memory"]

CALL_SECONDS = 900
"""How long the marker of a call that reserved tokens only (no hold, no lease) is kept.

A call with a hold or a lease keeps its marker as long as the longer of the two: past that,
the gateway has given up on the call anyway."""


FENCE_SECONDS = 60
"""How long a release of a call this process never admitted keeps that call from being admitted.

Here an admission cannot reach the store after its caller gave up (it runs inline), so the
fence only keeps the store's contract (`Store.release`) the same on both backends."""


class Lease(NamedTuple):
    """An in-flight idempotency reservation."""

    fingerprint: str
    call_id: str
    expires_at: float


class _Bucket:
    """Both token buckets of one API key; a level of None is a bucket never used (full)."""

    __slots__ = ("full_at", "r", "r_at", "t", "t_at")

    def __init__(self) -> None:
        self.r: float | None = None
        self.r_at = 0.0
        self.t: float | None = None
        self.t_at = 0.0
        self.full_at = 0.0  # from then on both buckets read full: the entry may go


class _Holds:
    """One tenant's holds: call_id -> (units, expires_at), with their running total.

    `earliest` is at or before the first expiry, so `active` scans only when a hold may have
    expired (about once per hold lifetime), not on every admission.
    """

    __slots__ = ("by_call", "earliest", "total")

    def __init__(self) -> None:
        self.by_call: dict[str, tuple[int, float]] = {}
        self.total = 0
        self.earliest = math.inf

    def active(self, now: float) -> int:
        if now >= self.earliest:
            live = {c: h for c, h in self.by_call.items() if h[1] > now}
            self.by_call = live
            self.total = sum(units for units, _ in live.values())
            self.earliest = min((expires for _, expires in live.values()), default=math.inf)
        return self.total


_NONE = _Holds()


def _place(by: dict[str, _Holds], owner: str, call_id: str, units: int, expires_at: float) -> bool:
    holds = by.get(owner)
    if holds is None:
        holds = by[owner] = _Holds()
    if call_id in holds.by_call:
        return False
    holds.by_call[call_id] = (units, expires_at)
    holds.total += units
    holds.earliest = min(holds.earliest, expires_at)
    return True


def _remove(by: dict[str, _Holds], owner: str, call_id: str) -> None:
    holds = by.get(owner)
    if holds is None:
        return
    hold = holds.by_call.pop(call_id, None)
    if hold is not None:
        holds.total -= hold[0]
        if not holds.by_call:
            del by[owner]


class Memory:
    """All ephemeral state of one `SqliteStore`."""

    def __init__(self) -> None:
        self.buckets: dict[str, _Bucket] = {}
        self.holds: dict[str, _Holds] = {}
        self.key_holds: dict[str, _Holds] = {}
        """The same holds again by API key (those of keys with a budget), for its budget."""
        self.hold_keys: dict[str, str] = {}
        """call_id -> the API key whose holds also count it."""
        self.last_used: dict[str, float] = {}
        """API key id -> when an admission last took it (this process's view)."""
        self.leases: dict[str, Lease] = {}
        self.calls: dict[str, float] = {}
        """call_id -> when to forget it: present while the call holds a reservation."""
        self.fenced: dict[str, float] = {}
        """call_id -> when to forget it: released before it was ever admitted."""

    # Rate buckets --------------------------------------------------------------------------

    def levels(self, api_key_id: str, limits: RateLimits, now: float) -> tuple[float, float]:
        """Both buckets refilled to `now` (a bucket that is off reads its capacity, 0)."""
        b = self.buckets.get(api_key_id)
        if b is None:
            return float(limits.requests_per_minute), float(limits.tokens_per_minute)
        return (
            buckets.refill(b.r, b.r_at, limits.requests_per_minute, now),
            buckets.refill(b.t, b.t_at, limits.tokens_per_minute, now),
        )

    def store_levels(
        self, api_key_id: str, limits: RateLimits, r: float, t: float, now: float
    ) -> None:
        """Keep the buckets that are on; one that is off keeps whatever it had."""
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        b = self.buckets.get(api_key_id)
        if b is None:
            if rpm <= 0 and tpm <= 0:
                return
            b = self.buckets[api_key_id] = _Bucket()
        if rpm > 0:
            b.r, b.r_at = r, now
            b.full_at = max(b.full_at, now + buckets.seconds_to_full(r, rpm))
        if tpm > 0:
            b.t, b.t_at = t, now
            b.full_at = max(b.full_at, now + buckets.seconds_to_full(t, tpm))

    # Holds ---------------------------------------------------------------------------------

    def held(self, tenant: str, now: float) -> int:
        """The tenant's unexpired holds (expired ones are dropped on the way)."""
        holds = self.holds.get(tenant)
        return holds.active(now) if holds is not None else 0

    def key_held(self, key_id: str, now: float) -> int:
        """The key's unexpired holds (placed with its `key_id`)."""
        holds = self.key_holds.get(key_id)
        return holds.active(now) if holds is not None else 0

    def hold(
        self, tenant: str, call_id: str, units: int, expires_at: float, key_id: str = ""
    ) -> None:
        """A hold of the tenant's wallet; with `key_id`, of that key's budget too."""
        if not _place(self.holds, tenant, call_id, units, expires_at):
            return  # a hold is placed once per call
        if key_id:
            _place(self.key_holds, key_id, call_id, units, expires_at)
            self.hold_keys[call_id] = key_id

    def unhold(self, tenant: str, call_id: str) -> None:
        _remove(self.holds, tenant, call_id)
        key_id = self.hold_keys.pop(call_id, None)
        if key_id is not None:
            _remove(self.key_holds, key_id, call_id)

    # Idempotency leases --------------------------------------------------------------------

    def lease(self, scope: str, now: float) -> Lease | None:
        """The live in-flight reservation of `scope` (an expired lease is no lease)."""
        lease = self.leases.get(scope)
        return lease if lease is not None and lease.expires_at > now else None

    def drop_lease(self, scope: str, call_id: str) -> None:
        """Free the scope only when this call holds it (a retry may own it by now)."""
        lease = self.leases.get(scope)
        if lease is not None and lease.call_id == call_id:
            del self.leases[scope]

    # Sweep ---------------------------------------------------------------------------------

    def sweep(self, now: float) -> None:
        """Drop everything expired: O(entries), run every few seconds from an admission."""
        self.buckets = {k: b for k, b in self.buckets.items() if b.full_at > now}
        for by in (self.holds, self.key_holds):
            for owner in list(by):
                holds = by[owner]
                holds.earliest = min(holds.earliest, now)  # force the scan
                holds.active(now)
                if not holds.by_call:
                    del by[owner]
        self.hold_keys = {
            c: k for c, k in self.hold_keys.items() if c in self.key_holds.get(k, _NONE).by_call
        }
        self.leases = {s: lease for s, lease in self.leases.items() if lease.expires_at > now}
        self.calls = {c: until for c, until in self.calls.items() if until > now}
        self.fenced = {c: until for c, until in self.fenced.items() if until > now}

    def sizes(self) -> dict[str, int]:
        """Entries per kind (for tests and metrics)."""
        return {
            "buckets": len(self.buckets),
            "holds": sum(len(h.by_call) for h in self.holds.values()),
            "leases": len(self.leases),
            "calls": len(self.calls),
            "fenced": len(self.fenced),
        }
