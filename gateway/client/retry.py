"""When the client tries again and how long it waits first.

A failure is retried only when trying again cannot do harm and may help:
- no answer at all: for a request that is safe to repeat (GET, cancel, a create carrying its
  Idempotency-Key); for any other request only when the connection was never made;
- 429, and 408/409/502/503/504 that the envelope marks retryable (409 is the gateway still
  running the first try of the same idempotent create);
- never another 4xx, nor a 5xx the envelope calls final.
The wait is the server's `Retry-After` when it sent one, else exponential backoff with full
jitter. A `Retry-After` longer than `max_retry_after` is not waited out: the error is raised
at once, so a caller never hangs for a minute on a limit it could report.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass

from gateway.client.errors import ApiError, RateLimited

__all__ = ["RetryPolicy", "parse_retry_after"]

_PASSING = frozenset({408, 409, 502, 503, 504})


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from a `Retry-After` header: delta-seconds (fractions accepted) or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - (time.time() if now is None else now))
    return max(0.0, seconds) if seconds == seconds else None  # NaN is no answer


@dataclass(frozen=True)
class RetryPolicy:
    """How many times a request is tried again, and the backoff between tries."""

    max_retries: int = 3
    backoff_initial: float = 0.5
    backoff_max: float = 8.0
    max_retry_after: float = 30.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: a random wait up to initial * 2**attempt, capped."""
        ceiling = min(self.backoff_max, self.backoff_initial * 2**attempt)
        return rng.uniform(ceiling / 2, ceiling)

    def retries_error(self, error: ApiError) -> bool:
        if isinstance(error, RateLimited):
            return True
        return error.retryable and error.status in _PASSING

    def wait_for(self, error: ApiError | None, attempt: int, rng: random.Random) -> float | None:
        """Seconds to wait before try `attempt + 1`, or None when the server asks too much."""
        if error is not None and error.retry_after is not None:
            if error.retry_after > self.max_retry_after:
                return None
            return error.retry_after
        return self.backoff(attempt, rng)
