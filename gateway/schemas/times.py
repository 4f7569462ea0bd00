"""Times as the API shows them: ISO 8601 in UTC with a `Z`."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["iso"]


def iso(timestamp: float) -> str:
    """`timestamp` (seconds since the epoch) as `2026-11-25T21:57:02.123456Z`."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")
