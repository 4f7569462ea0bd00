"""The boundaries of a key, on a moved clock: each budget period resets at its first instant
(UTC: a day at 00:00, a week on Monday, a month on the 1st; total never), and a key expires,
or a rotated secret's grace ends, at the instant named, even while its record is cached."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from gateway.auth import EXPIRED, Authenticator, hash_api_key, new_api_key
from gateway.config.loader import load_config
from gateway.errors import InvalidApiKey
from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    ApiKeyRecord,
    KeyBudget,
    KeySettings,
)
from gateway.store.periods import BudgetPeriod, period_bounds
from gateway.store.sqlite import SqliteStore
from tests.store.support import Run, admission, settlement
from tests.support.clock import Clock

ROOT = Path(__file__).resolve().parents[2]


def _at(*parts: int) -> float:
    return dt.datetime(*parts, tzinfo=dt.UTC).timestamp()  # type: ignore[misc]


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    with asyncio.Runner() as runner:
        yield runner.get_loop()


def _spend_all(store: SqliteStore, run: Run, budget: KeyBudget, n: int) -> None:
    adm = admission(f"c{n}", hold=300)
    adm = msgspec.structs.replace(adm, call=msgspec.structs.replace(adm.call, budget=budget))
    assert run(store.admit(adm)).outcome is AdmissionOutcome.ADMITTED
    run(store.settle(settlement(adm, charge=300)))


def _budgeted(call_id: str, budget: KeyBudget) -> Admission:
    adm = admission(call_id, hold=1)
    return msgspec.structs.replace(adm, call=msgspec.structs.replace(adm.call, budget=budget))


@pytest.mark.parametrize(
    ("period", "last_second", "reset"),
    [
        ("day", _at(2026, 11, 28, 23, 59, 59), _at(2026, 11, 29)),
        ("week", _at(2026, 11, 29, 23, 59, 59), _at(2026, 11, 30)),  # Sunday -> Monday
        ("month", _at(2026, 11, 30, 23, 59, 59), _at(2026, 12, 1)),
        ("month", _at(2028, 2, 29, 23, 59, 59), _at(2028, 3, 1)),  # a leap February
        ("month", _at(2026, 12, 31, 23, 59, 59), _at(2027, 1, 1)),  # the year's end
    ],
)
def test_a_spent_budget_resets_at_the_first_instant_of_the_next_period(
    tmp_path: Path,
    loop: asyncio.AbstractEventLoop,
    period: BudgetPeriod,
    last_second: float,
    reset: float,
) -> None:
    run = loop.run_until_complete
    clock = Clock(last_second - 3600)
    store = SqliteStore(tmp_path / "g.db", clock=clock)
    run(store.open())
    try:
        run(store.grant("t1", 10**6, entry_id="g", reason="top-up"))
        budget = KeyBudget(units=300, period=period)
        _spend_all(store, run, budget, 0)
        assert period_bounds(period, clock())[1] == reset  # resets_at, as the 402 names it
        clock.now = last_second + 0.999
        refused = run(store.admit(_budgeted("late", budget)))
        assert refused.outcome is AdmissionOutcome.KEY_BUDGET_EXCEEDED
        assert run(store.key_spent("t1", "k1", period)) == 300
        clock.now = reset
        assert run(store.key_spent("t1", "k1", period)) == 0
        assert run(store.admit(_budgeted("fresh", budget))).outcome is AdmissionOutcome.ADMITTED
        # The total never resets: what the key spent since it was made.
        assert run(store.key_spent("t1", "k1", "total")) == 300
    finally:
        run(store.close())


def test_a_total_budget_never_resets(tmp_path: Path, loop: asyncio.AbstractEventLoop) -> None:
    run = loop.run_until_complete
    clock = Clock(_at(2026, 11, 28, 12))
    store = SqliteStore(tmp_path / "g.db", clock=clock)
    run(store.open())
    try:
        run(store.grant("t1", 10**6, entry_id="g", reason="top-up"))
        budget = KeyBudget(units=300, period="total")
        _spend_all(store, run, budget, 0)
        assert period_bounds("total", clock()) == (0.0, None)
        clock.now = _at(2030, 1, 1)
        refused = run(store.admit(_budgeted("years-later", budget)))
        assert refused.outcome is AdmissionOutcome.KEY_BUDGET_EXCEEDED
    finally:
        run(store.close())


def test_a_key_expires_at_its_instant_on_a_cached_record(
    tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    run = loop.run_until_complete
    clock = Clock(_at(2026, 11, 28, 12))
    expires = _at(2026, 12, 31)
    store = SqliteStore(tmp_path / "g.db", clock=clock)
    run(store.open())
    expired: list[int] = []
    try:
        config = load_config(ROOT / "config" / "gateway.toml")
        auth = Authenticator(
            store, config, cache_seconds=3600, clock=clock, on_expired=lambda: expired.append(1)
        )
        key = new_api_key("default")
        settings = KeySettings(expires_at=expires)
        record = ApiKeyRecord(
            key_id="key_1", tenant="default", created_at=clock(), settings=settings
        )
        run(store.create_key(record, hash_api_key(key)))
        bearer = f"Bearer {key}"
        assert run(auth.authenticate(bearer)).key_id == "key_1"  # cached from here on
        clock.now = expires - 0.001
        assert run(auth.authenticate(bearer)).key_id == "key_1"
        clock.now = expires
        with pytest.raises(InvalidApiKey) as refused:
            run(auth.authenticate(bearer))
        assert refused.value.message == EXPIRED and refused.value.status_code == 401
        assert expired == [1]

        # A rotated key's old secret: valid through the grace, refused from its end.
        clock.now = _at(2026, 11, 28, 12)
        run(store.update_key("key_1", KeySettings()))
        new = new_api_key("default")
        run(store.rotate_key("key_1", hash_api_key(new), new[:10], grace_seconds=60))
        auth.forget()
        assert run(auth.authenticate(bearer)).key_id == "key_1"
        assert run(auth.authenticate(f"Bearer {new}")).key_id == "key_1"
        clock.now += 59.999
        assert run(auth.authenticate(bearer)).key_id == "key_1"
        clock.now += 0.001
        with pytest.raises(InvalidApiKey) as late:
            run(auth.authenticate(bearer))
        assert late.value.message == EXPIRED
        assert run(auth.authenticate(f"Bearer {new}")).key_id == "key_1"
    finally:
        run(store.close())
