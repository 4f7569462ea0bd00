"""Wallet and ledger: entries once per id, balance = sum of entries, stable newest-first pages."""

from __future__ import annotations

import pytest

from gateway.store.base import LedgerKind, Store
from tests.store.support import Run


def test_unknown_tenant_has_an_empty_wallet(store: Store, run: Run) -> None:
    wallet = run(store.wallet("nobody"))
    assert (wallet.balance_units, wallet.held_units) == (0, 0)
    page = run(store.ledger("nobody", limit=10))
    assert page.entries == [] and page.has_more is False


def test_grant_applies_once_per_entry_id(store: Store, run: Run) -> None:
    first = run(store.grant("t1", 500_000, entry_id="grant:welcome", reason="welcome"))
    again = run(store.grant("t1", 9, entry_id="grant:welcome", reason="other", kind="adjustment"))

    assert again == first
    assert (first.kind, first.amount_units, first.balance_after_units) == (
        "grant",
        500_000,
        500_000,
    )
    assert first.reason == "welcome" and first.tenant == "t1"
    assert run(store.wallet("t1")).balance_units == 500_000
    assert len(run(store.ledger("t1", limit=10)).entries) == 1


def test_adjustment_may_be_negative_and_ids_are_per_tenant(store: Store, run: Run) -> None:
    run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
    entry = run(store.grant("t1", -30, entry_id="adj1", reason="fix", kind="adjustment"))
    assert (entry.amount_units, entry.balance_after_units) == (-30, 70)

    other = run(store.grant("t2", 5, entry_id="g1", reason="same id, other tenant"))
    assert other.balance_after_units == 5
    assert run(store.wallet("t1")).balance_units == 70


def test_ledger_pages_newest_first_and_sums_to_the_balance(store: Store, run: Run) -> None:
    amounts = [100, -20, 300, -45, 7]
    for i, amount in enumerate(amounts):
        kind: LedgerKind = "grant" if amount > 0 else "adjustment"
        run(store.grant("t1", amount, entry_id=f"e{i}", reason=f"n{i}", kind=kind))

    seen = []
    after: str | None = None
    while True:
        page = run(store.ledger("t1", limit=2, after=after))
        seen.extend(page.entries)
        if not page.has_more:
            break
        after = page.entries[-1].id
    assert [e.id for e in seen] == ["e4", "e3", "e2", "e1", "e0"]
    assert [e.amount_units for e in seen] == amounts[::-1]

    balance = run(store.wallet("t1")).balance_units
    assert sum(e.amount_units for e in seen) == balance == 342
    running = 0
    for entry in reversed(seen):
        running += entry.amount_units
        assert entry.balance_after_units == running

    last = run(store.ledger("t1", limit=2, after="e1"))
    assert [e.id for e in last.entries] == ["e0"] and last.has_more is False
    assert run(store.ledger("t1", limit=2, after="no-such-entry")).entries == []


def test_ledger_rejects_a_limit_below_one(store: Store, run: Run) -> None:
    with pytest.raises(ValueError):
        run(store.ledger("t1", limit=0))
