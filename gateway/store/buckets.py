"""Token-bucket arithmetic: all of it for the SQLite store, the rate-state view for both.

Redis refills its buckets inside its scripts (common.lua) by the same rules: a bucket never
seen is full; it refills continuously at capacity/60 per second up to capacity (which also
clamps it when the limit was lowered); it may go negative when a call used more tokens than it
reserved. A limit of 0 means the bucket is off.
"""

from __future__ import annotations

import math

from gateway.store.records import RateLimits, RateState

__all__ = ["reconcile", "refill", "seconds_to_full", "state"]


def refill(level: float | None, at: float | None, capacity: int, now: float) -> float:
    if level is None or at is None:
        return float(capacity)
    return min(float(capacity), level + max(0.0, now - at) * capacity / 60)


def seconds_to_full(level: float, capacity: int) -> float:
    if capacity <= 0 or level >= capacity:
        return 0.0
    return (capacity - level) * 60 / capacity


def reconcile(level: float, capacity: int, delta: float) -> float:
    """Give reserved tokens back (never above capacity) or take what was used beyond them."""
    return min(float(capacity), level + delta) if delta > 0 else level + delta


def state(limits: RateLimits, r: float, t: float, need: int, limited: bool) -> RateState:
    """The x-ratelimit-* view of both buckets after a step."""
    rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
    retry = 0.0
    if limited:
        retry = (1 - r) * 60 / rpm if rpm > 0 and r < 1 else (need - t) * 60 / tpm
    return RateState(
        limit_requests=max(rpm, 0),
        remaining_requests=max(0, math.floor(r)) if rpm > 0 else 0,
        reset_requests_seconds=seconds_to_full(r, rpm),
        limit_tokens=max(tpm, 0),
        remaining_tokens=max(0, math.floor(t)) if tpm > 0 else 0,
        reset_tokens_seconds=seconds_to_full(t, tpm),
        retry_after_seconds=retry,
    )
