"""Query parameters the handlers read as strings and check with the gateway's own messages."""

from __future__ import annotations

from gateway.errors import ErrorDetail, ValidationFailed

__all__ = ["page_limit"]


def page_limit(value: str, *, high: int) -> int:
    """`limit` of a list endpoint: 1 to `high` in ASCII digits, else 422 naming it.

    `str.isdigit` alone would also pass "²" (which `int` refuses, a 500) and Arabic-Indic
    digits (which it reads)."""
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= high:
        message = f"an integer from 1 to {high}"
        raise ValidationFailed(
            f"limit must be {message}.", details=[ErrorDetail(field="limit", message=message)]
        )
    return int(value)
