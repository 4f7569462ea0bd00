"""A key budget's calendar periods in UTC: a day from 00:00, a week from Monday, a month from
the 1st, or the key's whole life (`total`).

A period is named by the number of its first day since 1970-01-01 (`total`: 0), so a spend
counter kept as (period, units) is read as 0 once the clock has left its period: a budget
resets by itself at the boundary, with nothing to sweep. common.lua computes the same numbers
from Redis's clock (`period_start_day`), and both read the time the store stamps ledger
entries with, so a charge counts in the period of its ledger entry.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

__all__ = ["PERIODS", "BudgetPeriod", "period_bounds", "period_start_day"]

BudgetPeriod = Literal["day", "week", "month", "total"]
PERIODS: tuple[BudgetPeriod, ...] = ("day", "week", "month", "total")

_DAY = 86_400
_EPOCH = dt.date(1970, 1, 1)


def period_start_day(period: BudgetPeriod, now: float) -> int:
    """The first day (days since 1970-01-01, UTC) of the period that `now` is in; 0 for total."""
    if period == "total":
        return 0
    day = int(now // _DAY)
    if period == "day":
        return day
    if period == "week":
        return day - (day + 3) % 7  # 1970-01-01 was a Thursday
    date = _EPOCH + dt.timedelta(days=day)
    return (date.replace(day=1) - _EPOCH).days


def period_bounds(period: BudgetPeriod, now: float) -> tuple[float, float | None]:
    """(start, end) in seconds since the epoch of the period `now` is in; end None for total
    (it never resets). `end` is `resets_at`: the first instant of the next period."""
    if period == "total":
        return 0.0, None
    start = period_start_day(period, now)
    if period == "day":
        end = start + 1
    elif period == "week":
        end = start + 7
    else:
        first = _EPOCH + dt.timedelta(days=start)
        following = (first.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        end = (following - _EPOCH).days
    return float(start * _DAY), float(end * _DAY)
