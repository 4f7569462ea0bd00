"""Following a task between polls: whether it changed, and when it should end."""

from __future__ import annotations

from gateway.client.models import Task

__all__ = ["Pace", "changed"]


def changed(before: Task | None, now: Task) -> bool:
    """Whether a poll brought news (a new status or progress) worth reporting."""
    if before is None:
        return True
    return (before.status, before.progress) != (now.status, now.progress)


class Pace:
    """When a task should finish, judging by how fast its progress percent rises."""

    def __init__(self) -> None:
        self._first: tuple[float, float] | None = None

    def eta(self, percent: float, now: float) -> float | None:
        """Seconds left at the average pace since the first poll; None until it moved."""
        if self._first is None:
            self._first = (percent, now)
            return None
        start, began = self._first
        if percent <= start:
            return None
        rate = (percent - start) / max(now - began, 1e-6)
        return max(0.0, 100.0 - percent) / rate
