"""A circuit breaker per upstream (provider), in process, on a clock that is passed in.

    closed     calls go through; `failure_threshold` failures in a row open it
    open       calls are refused without reaching the upstream, for `open_seconds`
    half_open  then exactly one call (the probe) goes through: its success closes the
               breaker, its failure opens it again for another `open_seconds`

A failure is what makes the gateway fall back (`gateway.routing.fallback.falls_back`): the
upstream unreachable, overloaded or timing out, 502/503/504, a connection broken before the
first byte. Any other answer, a rejection of the request included, shows the upstream alive
and counts as a success. A probe that ends neither way (its caller was cancelled) gives the
probe back (`abandon`), and a probe that never reports is taken over after `open_seconds`.

Closed is the common state and costs one attribute test per call: `allow()` and `succeeded()`
read the clock only when the breaker is not closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gateway.clock import Clock, monotonic

__all__ = ["Breaker", "BreakerSettings", "BreakerState", "Breakers"]

BreakerState = Literal["closed", "open", "half_open"]

_CLOSED = 0
_OPEN = 1
_HALF_OPEN = 2
_NAMES: tuple[BreakerState, ...] = ("closed", "open", "half_open")


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    failure_threshold: int = 5
    open_seconds: float = 30.0


class Breaker:
    __slots__ = ("_clock", "_failures", "_probe_since", "_since", "_state", "provider", "settings")

    def __init__(self, provider: str, settings: BreakerSettings, clock: Clock) -> None:
        self.provider = provider
        self.settings = settings
        self._clock = clock
        self._state = _CLOSED
        self._failures = 0
        self._since = 0.0
        """When it opened (open), or when its probe left (half-open)."""
        self._probe_since: float | None = None

    @property
    def closed(self) -> bool:
        return self._state == _CLOSED

    def state(self) -> BreakerState:
        """As a caller would find it now (an open breaker whose time is up is half-open)."""
        if self._state == _OPEN and self._clock() >= self._since + self.settings.open_seconds:
            return "half_open"
        return _NAMES[self._state]

    def refuses(self) -> bool:
        """True when a call now would be refused; takes nothing (unlike `allow`)."""
        if self._state == _CLOSED:
            return False
        now = self._clock()
        if self._state == _OPEN:
            return now < self._since + self.settings.open_seconds
        probe = self._probe_since
        return probe is not None and now < probe + self.settings.open_seconds

    def retry_in(self) -> float:
        """Seconds until a call may go through again (0 when it may now)."""
        if not self.refuses():
            return 0.0
        start = self._since if self._state == _OPEN else (self._probe_since or 0.0)
        return max(0.0, start + self.settings.open_seconds - self._clock())

    def allow(self) -> bool:
        """May a call go now? In half-open this takes the one probe: the caller must report
        `succeeded`, `failed` or `abandon` afterwards."""
        if self._state == _CLOSED:
            return True
        now = self._clock()
        if self._state == _OPEN:
            if now < self._since + self.settings.open_seconds:
                return False
            self._state = _HALF_OPEN
        elif self._probe_since is not None and now < self._probe_since + self.settings.open_seconds:
            return False  # the probe is out (a probe that never reported is taken over)
        self._probe_since = now
        return True

    def succeeded(self) -> None:
        if self._state != _CLOSED:
            self._state = _CLOSED
            self._probe_since = None
        self._failures = 0

    def failed(self) -> None:
        if self._state == _HALF_OPEN:
            self._open()
            return
        self._failures += 1
        if self._state == _CLOSED and self._failures >= self.settings.failure_threshold:
            self._open()

    def abandon(self) -> None:
        """The call ended without telling anything about the upstream (cancelled)."""
        if self._state == _HALF_OPEN:
            self._probe_since = None

    def _open(self) -> None:
        self._state = _OPEN
        self._since = self._clock()
        self._probe_since = None
        self._failures = 0


class Breakers:
    """The breakers of one process, by provider name. A router takes them in its constructor,
    so a reloaded routing file can keep the state of the upstreams it still names."""

    def __init__(self, clock: Clock = monotonic) -> None:
        self._clock = clock
        self._breakers: dict[str, Breaker] = {}

    def get(self, provider: str, settings: BreakerSettings) -> Breaker:
        """The provider's breaker, made on first use; its settings are the latest given."""
        breaker = self._breakers.get(provider)
        if breaker is None:
            breaker = self._breakers[provider] = Breaker(provider, settings, self._clock)
        else:
            breaker.settings = settings
        return breaker

    def states(self) -> dict[str, BreakerState]:
        return {name: breaker.state() for name, breaker in sorted(self._breakers.items())}
