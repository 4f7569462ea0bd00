"""A clock the test moves: pass it where the code takes `clock=`, then set or advance `now`."""

from __future__ import annotations

__all__ = ["Clock"]


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
