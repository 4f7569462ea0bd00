"""A tenant's rate limits as the routing file gives them (`[limits]`, `[tenants.<name>]`), and
as the store's rate checks take them."""

from __future__ import annotations

import msgspec

__all__ = ["RateLimits"]


class RateLimits(msgspec.Struct, kw_only=True, frozen=True):
    """Per-API-key budgets, from the tenant's config entry. 0 tokens_per_minute = no token limit."""

    requests_per_minute: int
    tokens_per_minute: int = 0
