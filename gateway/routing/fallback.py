"""When a failed upstream call is tried elsewhere, how long to wait first, and how the answer
tells what happened.

    falls_back(exc)       the upstream's fault, before anything reached the client:
                          unreachable, overloaded or rate limited (UpstreamUnavailable),
                          no answer in time (UpstreamTimeout), HTTP 502/503/504, a connection
                          broken or an answer unusable before the first byte (a ProviderError
                          without a status). Not: a rejection of the request (4xx), the
                          gateway's credentials refused (401/403), other statuses, or any
                          error the adapter says is not retryable (a model's own failure).
    retry_delay(...)      before calling again an upstream that already failed this request
    route_note(...)       what `x-gateway-route` says after a failure: `auto; fallback=ID;
                          failed=A:REASON,B:REASON`, `auto; failed=...` (none answered),
                          `pinned; retried=...` or `pinned; failed=...`; without failures it
                          is `pinned` or `auto; picked=ID` (`Route.note`)

Moving on to an upstream that has not failed yet happens at once: the failure was another
upstream's, and waiting would only add latency. Only a second call to the same upstream waits.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from providers.errors import ProviderError, UpstreamTimeout, UpstreamUnavailable

__all__ = [
    "FALLBACK_STATUSES",
    "RetryPolicy",
    "RouteNote",
    "failure_reason",
    "falls_back",
    "retry_delay",
    "route_note",
]

FALLBACK_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int | None = None
    """Upstream calls per request at most; None: each candidate once."""
    backoff_seconds: float = 0.1
    max_retry_after_seconds: float = 2.0


def falls_back(exc: BaseException) -> bool:
    if not isinstance(exc, ProviderError) or not exc.retryable:
        return False  # a rejection, a model's own failure, a canceled task, the gateway's bug
    if isinstance(exc, (UpstreamUnavailable, UpstreamTimeout)):
        return True
    return exc.upstream_status is None or exc.upstream_status in FALLBACK_STATUSES


def failure_reason(exc: BaseException) -> str:
    """A short word for `x-gateway-route` and the log: the status, `timeout`, `connect`, or
    `error` (a broken connection or an unusable answer)."""
    if isinstance(exc, ProviderError) and exc.upstream_status is not None:
        return str(exc.upstream_status)
    if isinstance(exc, UpstreamTimeout):
        return "timeout"
    if isinstance(exc, UpstreamUnavailable):
        return "connect"
    return "error"


def retry_delay(
    policy: RetryPolicy, failures: int, retry_after: float | None, rng: random.Random
) -> float | None:
    """Seconds to wait before calling an upstream again after its `failures`-th failure in
    this request; None when its `Retry-After` asks for longer than the policy waits.

    Exponential backoff (`backoff_seconds` x 2^(failures-1)) with jitter (50 to 100 % of it),
    and never less than the upstream's own `Retry-After`."""
    if retry_after is not None and retry_after > policy.max_retry_after_seconds:
        return None
    backoff = policy.backoff_seconds * 2.0 ** (failures - 1) * (0.5 + rng.random() / 2)
    return max(backoff, retry_after or 0.0)


@dataclass(frozen=True, slots=True)
class RouteNote:
    """One failed (or skipped) candidate: its model and why."""

    model: str
    reason: str


def route_note(pinned: bool, answered: str | None, failed: list[RouteNote]) -> str:
    """`x-gateway-route` for a call that tried more than its first candidate, or none
    answered (`answered` None)."""
    tried = ",".join(f"{note.model}:{note.reason}" for note in failed)
    if pinned:
        return f"pinned; failed={tried}" if answered is None else f"pinned; retried={tried}"
    if answered is None:
        return f"auto; failed={tried}"
    return f"auto; fallback={answered}; failed={tried}"
