"""Time, as the gateway's parts take it: a callable passed in, so a test moves time instead of
sleeping (`tests/support/clock.py`).

`Clock` is the type; `wall` (seconds since the epoch: expiries, ledger and task times) and
`monotonic` (durations, timeouts, breakers) are the real ones, the defaults where a clock is
taken.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Clock", "monotonic", "wall"]

Clock = Callable[[], float]

wall: Clock = time.time
monotonic: Clock = time.monotonic
