"""Usage and spend per tenant, model and day (UTC) over a time range, read from the ledger.

A chat charge is one request; a task's debit is one task; a task's refund counts on the
task's model and on the day of the refund. Spend is what was charged minus what was refunded.
Grants and adjustments are not usage. Ledger entries name their model (since the SQLite
schema 4 and the matching Redis entries); for a task entry written before, the model comes
from the task record, and an older chat charge shows the model "".

The ledger is read through `Store.ledger_range` in pages, so a report costs the entries of
its range (and a few lookups per tenant to find where the range starts), never a scan of
everything a tenant ever did; between pages the event loop serves other requests.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from gateway.admin.service import invalid, require_tenant
from gateway.config.loader import GatewayConfig
from gateway.store.base import LedgerEntry, Store

__all__ = [
    "DEFAULT_DAYS",
    "TimeRange",
    "UsageReport",
    "UsageRow",
    "parse_range",
    "usage",
    "usage_report",
]

DEFAULT_DAYS = 30
"""The range when none is given: the last 30 days."""

_PAGE = 500
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_FORMS = "a date (2026-11-01) or an ISO 8601 time (2026-11-01T12:00:00Z)"


@dataclass(frozen=True, slots=True)
class TimeRange:
    """From `since` (included) to `until` (excluded), in seconds since the epoch."""

    since: float
    until: float


@dataclass(slots=True)
class UsageRow:
    tenant: str
    model: str
    day: str
    """YYYY-MM-DD (UTC)."""
    requests: int = 0
    tasks: int = 0
    charged_units: int = 0
    refunded_units: int = 0

    @property
    def spend_units(self) -> int:
        return self.charged_units - self.refunded_units


@dataclass(frozen=True, slots=True)
class UsageReport:
    window: TimeRange
    rows: list[UsageRow] = field(default_factory=list)
    """By tenant, then day, then model."""


def parse_range(start: str | None, end: str | None, *, now: float) -> TimeRange:
    """`from` and `to` as given by an operator: a date (a whole UTC day: `to` includes it) or
    an ISO 8601 time (UTC unless it says otherwise). Missing `to`: now; missing `from`: 30
    days before `to`. ValidationFailed naming `from` or `to` for anything else."""
    until = _instant(end, "to", end_of_day=True) if end else now
    since = _instant(start, "from", end_of_day=False) if start else until - DEFAULT_DAYS * 86_400
    # A date `to` names a day: a `from` at its end (the next midnight) is after it too.
    day = end is not None and _DATE.fullmatch(end.strip()) is not None
    if since > until or (day and since == until):
        raise invalid("from", "must not be after 'to'")
    return TimeRange(since=since, until=until)


def _instant(text: str, name: str, *, end_of_day: bool) -> float:
    text = text.strip()
    try:
        if _DATE.fullmatch(text):
            day = date.fromisoformat(text)
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
            return (moment + timedelta(days=1) if end_of_day else moment).timestamp()
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise invalid(name, f"{_FORMS}, got {text[:40]!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


async def usage_report(
    store: Store,
    config: GatewayConfig,
    *,
    start: str | None,
    end: str | None,
    tenant: str | None,
    now: float,
) -> UsageReport:
    """The report of one declared tenant, or of every declared tenant."""
    window = parse_range(start, end, now=now)
    if tenant is not None:
        require_tenant(config, tenant)
    tenants = [tenant] if tenant is not None else sorted(config.tenants)
    return UsageReport(window=window, rows=await usage(store, tenants, window))


async def usage(store: Store, tenants: Sequence[str], window: TimeRange) -> list[UsageRow]:
    rows: dict[tuple[str, str, str], UsageRow] = {}
    for tenant in tenants:
        task_models: dict[str, str] = {}
        after: str | None = None
        while True:
            page = await store.ledger_range(
                tenant, since=window.since, until=window.until, limit=_PAGE, after=after
            )
            for entry in page.entries:
                if entry.kind in ("charge", "debit", "refund"):
                    model = entry.model or await _task_model(store, entry, task_models)
                    day = datetime.fromtimestamp(entry.created_at, UTC).date().isoformat()
                    row = rows.get((tenant, day, model))
                    if row is None:
                        row = rows[(tenant, day, model)] = UsageRow(tenant, model, day)
                    _count(row, entry)
            if not page.has_more or not page.entries:
                break
            after = page.entries[-1].id
            await asyncio.sleep(0)  # SQLite reads run inline: let requests in between pages
    return [rows[key] for key in sorted(rows)]


def _count(row: UsageRow, entry: LedgerEntry) -> None:
    if entry.kind == "refund":
        row.refunded_units += entry.amount_units
        return
    row.charged_units -= entry.amount_units  # charges and debits are negative amounts
    if entry.kind == "charge":
        row.requests += 1
    else:
        row.tasks += 1


async def _task_model(store: Store, entry: LedgerEntry, seen: dict[str, str]) -> str:
    """The model of an entry written before entries named it: its task's, if it has one."""
    if entry.task_id is None:
        return ""
    model = seen.get(entry.task_id)
    if model is None:
        task = await store.get_task(entry.tenant, entry.task_id)
        model = seen[entry.task_id] = task.resolved_model if task is not None else ""
    return model
