"""OpenAI's x-ratelimit-* response headers from a bucket state."""

from __future__ import annotations

import math

from gateway.store.base import RateState

__all__ = ["format_reset", "rate_limit_headers", "retry_after_seconds"]


def format_reset(seconds: float) -> str:
    """OpenAI's duration style: "0s", "120ms", "1.5s", "6m0s"."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(math.ceil(seconds), 60)
    return f"{minutes}m{rest}s"


def retry_after_seconds(rate: RateState) -> int:
    return max(1, math.ceil(rate.retry_after_seconds))


def rate_limit_headers(rate: RateState) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"x-ratelimit-limit-requests", str(rate.limit_requests).encode()),
        (b"x-ratelimit-remaining-requests", str(rate.remaining_requests).encode()),
        (b"x-ratelimit-reset-requests", format_reset(rate.reset_requests_seconds).encode()),
    ]
    if rate.limit_tokens:
        headers += [
            (b"x-ratelimit-limit-tokens", str(rate.limit_tokens).encode()),
            (b"x-ratelimit-remaining-tokens", str(rate.remaining_tokens).encode()),
            (b"x-ratelimit-reset-tokens", format_reset(rate.reset_tokens_seconds).encode()),
        ]
    return headers
