"""The wallet and its ledger as the API shows them (amounts as four-decimal credit strings)."""

from __future__ import annotations

import msgspec

__all__ = ["KeyBudgetView", "LedgerItem", "LedgerList", "WalletView"]


class KeyBudgetView(msgspec.Struct, kw_only=True):
    """The calling key's budget: what it spent in the current calendar period (UTC) and when
    that period ends (`resets_at`; null for a `total` budget, which never resets)."""

    credits: str
    period: str
    spent: str
    remaining: str
    resets_at: str | None


class WalletView(msgspec.Struct, kw_only=True):
    object: str = "wallet"
    balance_credits: str
    held_credits: str
    available_credits: str
    credits_per_usd_rate: str
    balance_usd_reference: str
    key_budget: KeyBudgetView | msgspec.UnsetType = msgspec.UNSET
    """Only for a key with a budget."""


class LedgerItem(msgspec.Struct, kw_only=True):
    id: str
    object: str = "ledger_entry"
    kind: str
    amount_credits: str
    balance_after_credits: str
    task_id: str | None
    request_id: str | None
    reason: str
    created_at: str


class LedgerList(msgspec.Struct, kw_only=True):
    object: str = "list"
    data: list[LedgerItem]
    has_more: bool
    next_after: str | None
