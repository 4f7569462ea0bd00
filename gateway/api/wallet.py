"""GET /v1/wallet and /v1/wallet/ledger (extension, Preview): balance and its history."""

from __future__ import annotations

import time

from litestar import get
from litestar.params import Parameter

from gateway.admin.keys import key_budget
from gateway.api.openapi.doc import OperationDoc, documented
from gateway.api.query import page_limit
from gateway.api.resources import Resources
from gateway.auth import Caller
from gateway.billing.money import format_credits, format_usd
from gateway.schemas.times import iso
from gateway.schemas.wallet import KeyBudgetView, LedgerItem, LedgerList, WalletView
from gateway.store.base import LedgerEntry, Store

__all__ = ["HANDLERS", "get_ledger", "get_wallet", "ledger_list"]


@get(
    "/v1/wallet",
    opt=documented(
        OperationDoc(
            summary="The wallet's balance (and the calling key's budget, when it has one)",
            tag="Wallet",
            release="Preview",
            responses={200: WalletView},
        )
    ),
)
async def get_wallet(caller: Caller, resources: Resources) -> WalletView:
    wallet = await resources.store.wallet(caller.tenant.name)
    rate = caller.tenant.credits_per_usd
    view = WalletView(
        balance_credits=format_credits(wallet.balance_units),
        held_credits=format_credits(wallet.held_units),
        available_credits=format_credits(wallet.balance_units - wallet.held_units),
        credits_per_usd_rate=str(rate),
        balance_usd_reference=format_usd(wallet.balance_units, rate),
    )
    budget = await key_budget(
        resources.store, caller.tenant.name, caller.key_id, caller.budget, time.time()
    )
    if budget is not None:
        view.key_budget = KeyBudgetView(**budget.view())  # type: ignore[arg-type]
    return view


def _item(entry: LedgerEntry) -> LedgerItem:
    return LedgerItem(
        id=entry.id,
        kind=entry.kind,
        amount_credits=format_credits(entry.amount_units),
        balance_after_credits=format_credits(entry.balance_after_units),
        task_id=entry.task_id,
        request_id=entry.request_id,
        reason=entry.reason,
        created_at=iso(entry.created_at),
    )


async def ledger_list(store: Store, tenant: str, limit: str, after: str | None) -> LedgerList:
    """One page of a tenant's ledger as the API shows it (also the admin API's)."""
    page = await store.ledger(tenant, limit=page_limit(limit, high=100), after=after or None)
    data = [_item(entry) for entry in page.entries]
    return LedgerList(
        data=data, has_more=page.has_more, next_after=data[-1].id if page.has_more else None
    )


@get(
    "/v1/wallet/ledger",
    opt=documented(
        OperationDoc(
            summary="The wallet's ledger, newest first",
            tag="Wallet",
            release="Preview",
            responses={200: LedgerList},
            errors=(422,),
            query={
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                "after": {"type": "string", "description": "The last entry id of a page."},
            },
        )
    ),
)
async def get_ledger(
    caller: Caller,
    resources: Resources,
    limit: str = Parameter(query="limit", default="20"),
    after: str | None = Parameter(query="after", default=None),
) -> LedgerList:
    return await ledger_list(resources.store, caller.tenant.name, limit, after)


HANDLERS = [get_ledger, get_wallet]
