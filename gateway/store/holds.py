"""The wallet-bounded hold (`Admission.min_hold_units`): what an admission holds and reserves
when the wallet cannot cover its whole hold. SQLite runs these; admit.lua does the same sums."""

from __future__ import annotations

__all__ = ["granted_hold", "granted_tokens"]


def granted_hold(hold: int, min_hold: int, available: int) -> int:
    """The hold placed: all of `hold` when `available` covers it; else, when the admission has
    a minimum (0 < min_hold < hold) that `available` covers, all that is available; else 0
    (refused). A hold of 0 is always granted."""
    if hold <= 0 or hold <= available:
        return hold
    if 0 < min_hold < hold and min_hold <= available:
        return available
    return 0


def granted_tokens(hold: int, min_hold: int, granted: int, tokens: int, min_tokens: int) -> int:
    """The tokens reserved with a hold of `granted`: `tokens` at the whole hold, in proportion
    between `min_tokens` (at `min_hold`) and `tokens` for a smaller one."""
    if granted >= hold or min_tokens >= tokens:
        return tokens
    return min_tokens + (granted - min_hold) * (tokens - min_tokens) // (hold - min_hold)
