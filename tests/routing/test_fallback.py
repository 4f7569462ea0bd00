"""Which failures fall back, the waits before calling an upstream again, and the route notes."""

from __future__ import annotations

import random

import pytest

from gateway.routing.fallback import (
    RetryPolicy,
    RouteNote,
    failure_reason,
    falls_back,
    retry_delay,
    route_note,
)
from providers.errors import (
    ProviderError,
    TaskCanceled,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)


@pytest.mark.parametrize(
    ("error", "expected", "reason"),
    [
        (UpstreamUnavailable("overloaded", upstream_status=503), True, "503"),
        (UpstreamUnavailable("slow down", upstream_status=429), True, "429"),
        (UpstreamUnavailable("cannot connect"), True, "connect"),
        (UpstreamTimeout("no answer"), True, "timeout"),
        (UpstreamTimeout("gateway timeout", upstream_status=504), True, "504"),
        (ProviderError("bad gateway", upstream_status=502), True, "502"),
        (ProviderError("closed the connection before answering"), True, "error"),
        (ProviderError("server error", upstream_status=500), False, "500"),
        (ProviderError("bad key", upstream_status=401), False, "401"),
        (UpstreamRejectedRequest("bad request", upstream_status=400), False, "400"),
        (TaskCanceled("canceled"), False, "error"),
        (ValueError("a bug of ours"), False, "error"),
    ],
)
def test_what_falls_back(error: Exception, expected: bool, reason: str) -> None:
    assert falls_back(error) is expected
    assert failure_reason(error) == reason


POLICY = RetryPolicy(backoff_seconds=0.1, max_retry_after_seconds=2.0)


def test_backoff_doubles_per_failure_with_jitter_between_half_and_all() -> None:
    rng = random.Random(7)
    for failures, ceiling in ((1, 0.1), (2, 0.2), (3, 0.4)):
        delays = [retry_delay(POLICY, failures, None, rng) for _ in range(200)]
        assert all(d is not None and ceiling / 2 <= d <= ceiling for d in delays)
        assert max(d for d in delays if d is not None) > ceiling * 0.9  # jittered, spread out


def test_retry_after_is_honoured_up_to_the_cap_and_beyond_it_the_upstream_is_not_waited_for() -> (
    None
):
    rng = random.Random(1)
    assert retry_delay(POLICY, 1, 1.5, rng) == 1.5  # longer than the backoff: waited out
    assert retry_delay(POLICY, 1, 2.0, rng) == 2.0  # exactly the cap
    assert retry_delay(POLICY, 1, 2.01, rng) is None  # beyond: move on without sleeping
    small = retry_delay(POLICY, 3, 0.01, rng)
    assert small is not None and small >= 0.2  # the backoff when it is the longer


def test_route_notes() -> None:
    failed = [RouteNote("a", "503"), RouteNote("b", "breaker_open")]
    assert route_note(False, "c", failed) == "auto; fallback=c; failed=a:503,b:breaker_open"
    assert route_note(False, None, failed) == "auto; failed=a:503,b:breaker_open"
    assert route_note(True, "a", failed[:1]) == "pinned; retried=a:503"
    assert route_note(True, None, failed[:1]) == "pinned; failed=a:503"
