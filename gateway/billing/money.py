"""Credits are integers inside (units of 0.0001 credit) and four-decimal strings at the edge.

Keeping the unit equal to the displayed precision means the sum of rendered ledger amounts is
exactly the rendered balance: nothing is lost to rounding between the two.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

__all__ = [
    "UNITS_PER_CREDIT",
    "format_credits",
    "format_usd",
    "parse_credits",
    "units_from_credits",
    "usd_reference",
]

UNITS_PER_CREDIT = 10_000
_FOUR_PLACES = Decimal("0.0001")


def units_from_credits(credits: Decimal) -> int:
    """Round a credit amount to whole units (half up), as every charge is rounded."""
    return int((credits * UNITS_PER_CREDIT).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def parse_credits(text: str) -> int:
    """Parse a user-given credit amount ("12.5") into units; ValueError when it is not one."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation as exc:
        raise ValueError(f"not a decimal number: {text!r}") from exc
    if not value.is_finite():
        raise ValueError(f"not a finite number: {text!r}")
    if value != value.quantize(_FOUR_PLACES):
        raise ValueError(f"at most four decimal places: {text!r}")
    return units_from_credits(value)


def format_credits(units: int) -> str:
    """Render units as the four-decimal credit string of the API ("50.0000")."""
    return str((Decimal(units) / UNITS_PER_CREDIT).quantize(_FOUR_PLACES))


def usd_reference(units: int, credits_per_usd: Decimal) -> Decimal:
    return Decimal(units) / UNITS_PER_CREDIT / credits_per_usd


def format_usd(units: int, credits_per_usd: Decimal) -> str:
    """Display-only USD value of a credit amount, four decimals like the wallet's."""
    return str(usd_reference(units, credits_per_usd).quantize(_FOUR_PLACES, rounding=ROUND_HALF_UP))
