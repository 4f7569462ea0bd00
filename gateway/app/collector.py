"""The garbage collector's settings for a serving process.

A request allocates a few hundred objects that refcounting frees when it ends, but with 16
requests in flight the youngest generation's default threshold (700 allocations) is reached
every few requests, mid-flight: each collection walks the live requests' objects and promotes
them, and then their frees no longer count down. Measured at c=16 on a chat, that was a
collection every ~20 requests, ~10 us of collector time a request; at 10,000 it is ~2 us. Cyclic
garbage waits longer (at most ~10,000 objects, a few MB). What start-up built (modules, the
app, the configuration) lives as long as the process, so it is frozen out of every collection.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_collector"]

YOUNG_THRESHOLD = 10_000
"""Allocations (net of frees) between two collections of the youngest generation."""


def settle_collector() -> None:
    """Freeze what exists now and collect the young generation less often; call once the app
    is built."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
