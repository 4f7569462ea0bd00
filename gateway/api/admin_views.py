"""How /admin/v1 shows records: money as four-decimal credit strings, times as ISO 8601 UTC.

Plain functions from the admin service's records to the admin contract's JSON objects; the
one place that says which fields the admin page gets.
"""

from __future__ import annotations

from typing import Any

from gateway.admin.keys import BudgetState
from gateway.admin.service import TenantSummary
from gateway.admin.usage import UsageReport, UsageRow
from gateway.billing.money import format_credits
from gateway.schemas.times import iso
from gateway.store.base import ApiKeyRecord, LedgerEntry, TaskRecord

__all__ = [
    "entry_view",
    "failed_callback_view",
    "key_view",
    "task_view",
    "tenant_view",
    "usage_view",
]


def tenant_view(summary: TenantSummary) -> dict[str, Any]:
    wallet = summary.wallet
    return {
        "id": summary.name,
        "models": summary.models,
        "requests_per_minute": summary.requests_per_minute,
        "tokens_per_minute": summary.tokens_per_minute,
        "balance": format_credits(wallet.balance_units),
        "held": format_credits(wallet.held_units),
        "keys": {"active": summary.active_keys, "revoked": summary.revoked_keys},
    }


def key_view(record: ApiKeyRecord, budget: BudgetState | None = None) -> dict[str, Any]:
    """The Key object: `models` ["*"] for every model of the tenant; `budget` null without one
    (`budget` passed in: its spend now)."""
    s = record.settings
    return {
        "object": "key",
        "id": record.key_id,
        "tenant": record.tenant,
        "name": s.name or None,
        "prefix": record.prefix,
        "created_at": iso(record.created_at),
        "revoked_at": _iso(record.revoked_at),
        "expires_at": _iso(s.expires_at),
        "models": list(s.models) or ["*"],
        "budget": budget.view() if budget is not None else None,
        "requests_per_minute": s.requests_per_minute,
        "tokens_per_minute": s.tokens_per_minute,
        "metadata": dict(s.metadata),
        "last_used_at": _iso(record.last_used_at),
    }


def _iso(timestamp: float | None) -> str | None:
    return iso(timestamp) if timestamp is not None else None


def entry_view(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "tenant": entry.tenant,
        "kind": entry.kind,
        "amount": format_credits(entry.amount_units),
        "balance_after": format_credits(entry.balance_after_units),
        "reason": entry.reason,
        "created_at": iso(entry.created_at),
    }


def task_view(task: TaskRecord) -> dict[str, Any]:
    """`model` is the model the task runs on (`auto` resolved); `progress` its percent;
    `cost` what it costs now (the price less any refund)."""
    return {
        "id": task.task_id,
        "tenant": task.tenant,
        "capability": task.capability,
        "model": task.resolved_model,
        "status": task.status,
        "progress": task.progress.percent,
        "created_at": iso(task.created_at),
        "finished_at": iso(task.completed_at) if task.completed_at is not None else None,
        "cost": format_credits(task.price_units - task.refunded_units),
    }


def failed_callback_view(task: TaskRecord) -> dict[str, Any]:
    """A task whose callback delivery failed or was disabled, for operators."""
    cb = task.callback
    return {
        "task_id": task.task_id,
        "tenant": task.tenant,
        "task_status": task.status,
        "url": cb.url if cb else None,
        "callback_id": cb.callback_id if cb else None,
        "status": cb.status if cb else None,
        "attempt_count": cb.attempt_count if cb else 0,
        "last_error": cb.last_error if cb else None,
        "finished_at": iso(task.completed_at) if task.completed_at is not None else None,
    }


def usage_view(
    report: UsageReport, rows: list[UsageRow], *, has_more: bool, next_after: str | None
) -> dict[str, Any]:
    """The report's range and one page of its rows."""
    return {
        "object": "usage",
        "from": iso(report.window.since),
        "to": iso(report.window.until),
        "has_more": has_more,
        "next_after": next_after,
        "data": [
            {
                "tenant": row.tenant,
                "model": row.model,
                "day": row.day,
                "requests": row.requests,
                "tasks": row.tasks,
                "charged": format_credits(row.charged_units),
                "refunded": format_credits(row.refunded_units),
                "spend": format_credits(row.spend_units),
            }
            for row in rows
        ],
    }
