"""The wallet and its ledger as the API shows them (amounts as four-decimal credit strings)."""

from __future__ import annotations

import msgspec

__all__ = ["LedgerItem", "LedgerList", "WalletView"]


class WalletView(msgspec.Struct, kw_only=True):
    object: str = "wallet"
    balance_credits: str
    held_credits: str
    available_credits: str
    credits_per_usd_rate: str
    balance_usd_reference: str


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
