"""Ledger entry (and hold) ids, built in one place for both backends.

Every entry id is deterministic: it names the one thing that may move the balance once, so a
retried or replayed step finds its entry already there and never applies it twice. Ids are
unique per tenant (the ledger's key is tenant + id).
"""

from __future__ import annotations

__all__ = ["charge_id", "debit_id", "hold_id", "refund_id"]


def charge_id(call_id: str) -> str:
    """A chat call's charge: at most one per call."""
    return f"charge:{call_id}"


def hold_id(call_id: str) -> str:
    """A chat call's credit hold, or an unconfirmed task's (by its task id): not a ledger
    entry, holds only lower what is available."""
    return f"hold:{call_id}"


def debit_id(task_id: str) -> str:
    """A task's prepaid price, taken when the task is created."""
    return f"debit:{task_id}"


def refund_id(task_id: str) -> str:
    """A task's refund, full or partial: at most one per task, whoever finalizes it."""
    return f"refund:{task_id}"
