"""The garbage collector's young-generation threshold for a serving process.

A request allocates a few hundred objects that refcounting frees when it ends, but with 16
requests in flight the default threshold (700 allocations, net of frees) is reached every few
requests, mid-flight: each collection walks the live requests' objects and promotes them, and
then their frees no longer count down. Measured at c=16 on a chat, that was a collection every
~20 requests, ~10 us of collector time a request; at 10,000 it is ~2 us. Cyclic garbage waits
longer (at most ~10,000 objects, a few MB). What start-up built is frozen out of collections
by the app's lifespan (`gateway.app.factory`).
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_collector"]

YOUNG_THRESHOLD = 10_000
"""Allocations (net of frees) between two collections of the youngest generation."""


def settle_collector() -> None:
    """Collect the young generation every `YOUNG_THRESHOLD` allocations (the older ones as
    before)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
