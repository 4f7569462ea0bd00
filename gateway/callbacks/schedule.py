"""When the next attempt of a callback is due: the Standard Webhooks retry schedule, or the
routing file's `callback_retry_seconds`, stretched to a receiver's `Retry-After` (at most 24 h)."""

from __future__ import annotations

from collections.abc import Sequence
from email.utils import parsedate_to_datetime

__all__ = ["MAX_WAIT", "STANDARD_WAITS", "next_wait", "retry_after_seconds"]

STANDARD_WAITS: tuple[float, ...] = (5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400)
"""After the first attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h."""
MAX_WAIT = 86_400.0


def next_wait(
    attempts: int, waits: Sequence[float], retry_after: float | None = None
) -> float | None:
    """Seconds until the next attempt after `attempts` attempts failed; None when that was the
    last (the callback is `failed`)."""
    if attempts < 1 or attempts > len(waits):
        return None
    wait = waits[attempts - 1]
    if retry_after is not None:
        wait = max(wait, retry_after)
    return min(wait, MAX_WAIT)


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """A `Retry-After` header (seconds or an HTTP date) as seconds from `now`; None if absent
    or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)
