"""The circuit breaker's states on a moved clock: closed -> open -> half-open (one probe) ->
closed or open again."""

from __future__ import annotations

from gateway.routing.breakers import Breaker, Breakers, BreakerSettings
from tests.support.clock import Clock

SETTINGS = BreakerSettings(failure_threshold=3, open_seconds=10.0)


def _breaker(clock: Clock) -> Breaker:
    return Breaker("up", SETTINGS, clock)


def test_it_opens_after_consecutive_failures_only() -> None:
    clock = Clock()
    breaker = _breaker(clock)
    breaker.failed()
    breaker.failed()
    breaker.succeeded()  # a success in between resets the count
    breaker.failed()
    breaker.failed()
    assert breaker.state() == "closed" and breaker.allow()
    breaker.failed()
    assert breaker.state() == "open"
    assert not breaker.allow() and breaker.refuses()
    assert breaker.retry_in() == 10.0


def test_after_open_seconds_exactly_one_probe_goes_and_its_success_closes() -> None:
    clock = Clock()
    breaker = _breaker(clock)
    for _ in range(3):
        breaker.failed()
    clock.advance(9.999)
    assert not breaker.allow()
    clock.advance(0.001)
    assert breaker.state() == "half_open" and not breaker.refuses()
    assert breaker.allow()  # the probe
    assert not breaker.allow() and breaker.refuses()  # nobody else while it is out
    breaker.succeeded()
    assert breaker.state() == "closed"
    assert breaker.allow() and breaker.allow()


def test_a_failed_probe_opens_it_again_for_another_period() -> None:
    clock = Clock()
    breaker = _breaker(clock)
    for _ in range(3):
        breaker.failed()
    clock.advance(10)
    assert breaker.allow()
    breaker.failed()  # one failure is enough in half-open
    assert breaker.state() == "open" and not breaker.allow()
    clock.advance(10)
    assert breaker.allow()


def test_an_abandoned_probe_lets_the_next_caller_probe() -> None:
    clock = Clock()
    breaker = _breaker(clock)
    for _ in range(3):
        breaker.failed()
    clock.advance(10)
    assert breaker.allow()
    breaker.abandon()
    assert breaker.allow()


def test_a_probe_that_never_reports_is_taken_over_after_open_seconds() -> None:
    clock = Clock()
    breaker = _breaker(clock)
    for _ in range(3):
        breaker.failed()
    clock.advance(10)
    assert breaker.allow()
    clock.advance(9)
    assert not breaker.allow()
    assert breaker.retry_in() == 1.0
    clock.advance(1)
    assert breaker.allow()


def test_the_registry_keeps_one_breaker_per_provider_and_reports_states() -> None:
    clock = Clock()
    breakers = Breakers(clock)
    first = breakers.get("a", SETTINGS)
    assert breakers.get("a", BreakerSettings(failure_threshold=1)) is first
    assert first.settings.failure_threshold == 1  # the latest settings apply
    breakers.get("b", SETTINGS)
    first.failed()
    assert breakers.states() == {"a": "open", "b": "closed"}
    clock.advance(30)
    assert breakers.states() == {"a": "half_open", "b": "closed"}
