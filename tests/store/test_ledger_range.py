"""The ledger by time and by id, and the model each charge, debit and refund was for.

`ledger_range` is what usage reports read: the entries stamped in [since, until), oldest
first, in pages. Stamps come from the store's clock (Redis's on Redis), so the tests take the
bounds from the entries they wrote; a short sleep between writes keeps the stamps apart.
"""

from __future__ import annotations

import time

import pytest

from gateway.store.base import LedgerEntry, RateLimits, Store, TaskCreate
from tests.store.support import Run, admission, create_confirmed, settlement


def _grants(store: Store, run: Run, count: int, tenant: str = "t1") -> list[LedgerEntry]:
    entries = []
    for i in range(count):
        entries.append(run(store.grant(tenant, i + 1, entry_id=f"{tenant}-e{i}", reason="r")))
        time.sleep(0.002)  # entries a clock tick apart: the ranges below fall between them
    return entries


def _all_pages(
    store: Store, run: Run, since: float, until: float, limit: int, tenant: str = "t1"
) -> list[list[str]]:
    pages: list[list[str]] = []
    after: str | None = None
    while True:
        page = run(store.ledger_range(tenant, since=since, until=until, limit=limit, after=after))
        pages.append([e.id for e in page.entries])
        if not page.has_more:
            return pages
        assert page.entries, "a page that says there is more must not be empty"
        after = page.entries[-1].id


def test_range_is_oldest_first_within_its_bounds(store: Store, run: Run) -> None:
    e = _grants(store, run, 5)
    _grants(store, run, 2, tenant="t2")  # another tenant's entries, stamped after
    stamps = [entry.created_at for entry in e]
    assert stamps == sorted(stamps) and len(set(stamps)) == 5

    page = run(store.ledger_range("t1", since=stamps[1], until=stamps[3], limit=10))
    assert [x.id for x in page.entries] == ["t1-e1", "t1-e2"] and page.has_more is False
    assert page.entries[0] == e[1]  # the same entries as written, every field

    assert _all_pages(store, run, stamps[0], stamps[4] + 1, 2) == [
        ["t1-e0", "t1-e1"],
        ["t1-e2", "t1-e3"],
        ["t1-e4"],
    ]
    # A page that ends exactly where the range ends says there is no more.
    assert _all_pages(store, run, stamps[0], stamps[4], 2) == [
        ["t1-e0", "t1-e1"],
        ["t1-e2", "t1-e3"],
    ]
    assert _all_pages(store, run, 0.0, time.time() + 3600, 5) == [[f"t1-e{i}" for i in range(5)]]


def test_empty_ranges_and_unknown_cursors(store: Store, run: Run) -> None:
    e = _grants(store, run, 3)
    last = e[-1].created_at

    def ids(since: float, until: float, after: str | None = None) -> list[str]:
        page = run(store.ledger_range("t1", since=since, until=until, limit=10, after=after))
        return [x.id for x in page.entries]

    assert ids(last + 1, last + 2) == []
    assert ids(0.0, e[0].created_at) == []
    assert ids(e[1].created_at, e[1].created_at) == []
    assert ids(0.0, last + 1, after="no-such-entry") == []
    assert ids(0.0, last + 1, after="t1-e2") == []
    assert ids(0.0, last + 1, after="t1-e0") == ["t1-e1", "t1-e2"]
    assert run(store.ledger_range("nobody", since=0.0, until=last + 1, limit=5)).entries == []
    with pytest.raises(ValueError):
        run(store.ledger_range("t1", since=0.0, until=1.0, limit=0))


def test_every_range_of_a_longer_ledger_matches_a_plain_filter(store: Store, run: Run) -> None:
    e = _grants(store, run, 33)
    stamps = [entry.created_at for entry in e]
    for i in range(0, 33, 4):
        for j in range(i, 34, 5):
            until = stamps[j] if j < 33 else stamps[-1] + 1
            expected = [entry.id for entry in e if stamps[i] <= entry.created_at < until]
            pages = _all_pages(store, run, stamps[i], until, 7)
            assert [x for page in pages for x in page] == expected, (i, j)
            assert all(len(page) <= 7 for page in pages)
    # Between two stamps: the first entry at or after the lower bound.
    middle = (stamps[10] + stamps[11]) / 2
    page = run(store.ledger_range("t1", since=middle, until=stamps[13], limit=10))
    assert [x.id for x in page.entries] == ["t1-e11", "t1-e12"]


def test_an_entry_is_found_by_its_id(store: Store, run: Run) -> None:
    entry = run(store.grant("t1", 42, entry_id="invoice-1", reason="invoice"))
    assert run(store.ledger_entry("t1", "invoice-1")) == entry
    assert run(store.ledger_entry("t2", "invoice-1")) is None  # ids are per tenant
    assert run(store.ledger_entry("t1", "invoice-2")) is None


def test_charges_debits_and_refunds_carry_their_model(store: Store, run: Run) -> None:
    grant = run(store.grant("t1", 10_000, entry_id="g1", reason="top-up"))
    assert grant.model == ""

    adm = admission("c1", hold=500)
    run(store.admit(adm))
    run(store.settle(settlement(adm, charge=120, model="sim-chat-1")))
    run(
        create_confirmed(
            store,
            TaskCreate(
                task_id="task_m",
                tenant="t1",
                api_key_id="k1",
                request_id="req_task_m",
                limits=RateLimits(requests_per_minute=1000),
                capability="text_to_image",
                model="auto",
                resolved_model="image-model-2",
                price_units=300,
                input={"prompt": "a fox"},
                metadata={},
            ),
        )
    )
    run(store.request_cancel("t1", "task_m"))  # queued: refunded in full

    entries = {x.id: x for x in run(store.ledger("t1", limit=10)).entries}
    assert entries["charge:c1"].model == "sim-chat-1"
    assert (entries["debit:task_m"].model, entries["refund:task_m"].model) == (
        "image-model-2",
        "image-model-2",
    )
    assert entries["refund:task_m"].task_id == "task_m"
    everything = run(store.ledger_range("t1", since=0.0, until=time.time() + 3600, limit=10))
    models = [x.model for x in everything.entries]
    assert models == ["", "sim-chat-1", "image-model-2", "image-model-2"]
    assert run(store.ledger_entry("t1", "charge:c1")) == entries["charge:c1"]
