"""What the stateful models of the wallet and the tasks share: the stores they run on, the
time those stores see, the model of a wallet, and how a run is sized.

Each hypothesis example gets a fresh store: a new SQLite file, or a new key prefix on real
Redis. Time is the model's to move, on both:

- SQLite takes the test's `Clock` (`SqliteStore(clock=...)`).
- Redis scripts read the server's `TIME`; `ClockedRedisStore` runs the very same scripts with
  that one line of `common.lua` replaced by a read of a key the test sets (`clocked_source`),
  so holds, task leases and rate buckets follow the test's clock there too. What Redis ends by
  itself (key TTLs: in-flight idempotency records, stored replies, done markers) still runs on
  real time, which in a test is a few seconds: the model knows (`Backend.ttl_by_clock`).
  XAUTOCLAIM's idle time is real too, so before each claim on Redis the test waits out the
  workers' (short) claim lease: every entry is then as idle as the clock says it is.

Size: a short, derandomized run by default (CI); `GATEWAY_STATEFUL_STEPS=N` runs random
batches until each test has executed at least N steps (see `run_machine`).
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import redis
from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from gateway.store.base import LedgerEntry, LedgerKind, Store
from gateway.store.redis import RedisStore
from gateway.store.redis.scripts import script_source
from gateway.store.sqlite import SqliteStore
from tests.support.clock import Clock

__all__ = [
    "CLAIM_LEASE_SECONDS",
    "STEPS_ENV",
    "Backend",
    "Backends",
    "ClockedRedisStore",
    "Figures",
    "Hold",
    "StatefulMachine",
    "WalletModel",
    "check_wallets",
    "clocked_source",
    "read_ledger",
    "run_machine",
]

_T = TypeVar("_T")

STEPS_ENV = "GATEWAY_STATEFUL_STEPS"
"""Set to N to run the full form: at least N steps per test (per store)."""

CLAIM_LEASE_SECONDS = 0.05
"""The workers' claim lease. On Redis it is also XAUTOCLAIM's idle threshold (real time), so
it is short: the test sleeps it out before each claim. A worker that lives touches at once."""

_SERVER_TIME = (
    "local TIME = redis.call('TIME')\nlocal NOW = tonumber(TIME[1]) + tonumber(TIME[2]) / 1000000\n"
)


def clocked_source(name: str, clock_key: str) -> str:
    """The store's script `name`, reading NOW from `clock_key` instead of the server's TIME."""
    source = script_source(name)
    if _SERVER_TIME not in source:
        raise AssertionError("common.lua no longer reads TIME as clocked_source expects")
    return source.replace(_SERVER_TIME, f"local NOW = tonumber(redis.call('GET', '{clock_key}'))\n")


class ClockedRedisStore(RedisStore):
    """`RedisStore` whose scripts take the time from `clock_key` (see the module docstring)."""

    def __init__(self, url: str, *, prefix: str, clock_key: str) -> None:
        super().__init__(url, prefix=prefix, source=lambda name: clocked_source(name, clock_key))


@dataclass
class Backend:
    """One store under test and the clock it runs on."""

    kind: str
    store: Store
    clock: Clock
    ttl_by_clock: bool
    """True when everything that expires follows the clock (SQLite); False on Redis, where key
    TTLs (in-flight records, stored replies, fences) run on real time: never within a test."""
    fence_seconds: float
    """How long a release keeps a never-admitted call from being admitted."""
    _moved: Callable[[float], None]
    _close: Callable[[], None]

    @property
    def now(self) -> float:
        return self.clock.now

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self._moved(self.clock.now)

    def before_claim(self) -> None:
        """Redis: let every queue entry become as idle as the claim lease (real time)."""
        if self.kind == "redis":
            time.sleep(CLAIM_LEASE_SECONDS + 0.015)

    def close(self) -> None:
        self._close()


class Backends:
    """Opens a fresh store per example: a new SQLite file, or a new key prefix on Redis."""

    def __init__(
        self, kind: str, runner: asyncio.Runner, tmp_path: Path, redis_url: str | None = None
    ) -> None:
        self.kind, self.runner, self.tmp_path, self.redis_url = kind, runner, tmp_path, redis_url
        self._clock_key = f"test:stateful-clock:{uuid.uuid4().hex}"
        self._opened = 0
        self._sync: redis.Redis | None = None
        if kind == "redis":
            assert redis_url is not None
            self._sync = redis.Redis.from_url(redis_url)

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return self.runner.get_loop().run_until_complete(coro)  # see tests/store/conftest.py

    def open(self) -> Backend:
        self._opened += 1
        clock = Clock()
        if self.kind == "sqlite":
            return self._open_sqlite(clock)
        return self._open_redis(clock)

    def _open_sqlite(self, clock: Clock) -> Backend:
        path = self.tmp_path / f"stateful-{self._opened}.db"
        store = SqliteStore(path, clock=clock)
        self.run(store.open())

        def close() -> None:
            self.run(store.close())
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)

        return Backend(
            kind="sqlite",
            store=store,
            clock=clock,
            ttl_by_clock=True,
            fence_seconds=60.0,
            _moved=lambda _now: None,
            _close=close,
        )

    def _open_redis(self, clock: Clock) -> Backend:
        sync, url, key = self._sync, self.redis_url, self._clock_key
        assert sync is not None and url is not None
        prefix = f"test:{uuid.uuid4().hex}:"
        sync.set(key, repr(clock.now))
        store = ClockedRedisStore(url, prefix=prefix, clock_key=key)
        self.run(store.open())

        def moved(now: float) -> None:
            sync.set(key, repr(now))

        def close() -> None:
            self.run(store.close())
            keys = list(sync.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                sync.unlink(*keys)

        return Backend(
            kind="redis",
            store=store,
            clock=clock,
            ttl_by_clock=False,
            fence_seconds=math.inf,
            _moved=moved,
            _close=close,
        )

    def close(self) -> None:
        if self._sync is not None:
            self._sync.delete(self._clock_key)
            self._sync.close()


@dataclass
class Figures:
    """What a run did: counted by the machines, printed by `run_machine`."""

    examples: int = 0
    steps: int = 0
    rules: dict[str, int] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)


class StatefulMachine(RuleBasedStateMachine):
    """A machine on a fresh store per example. Subclasses (made per test) set `backends`."""

    backends: ClassVar[Backends]
    figures: ClassVar[Figures]

    def __init__(self) -> None:
        super().__init__()
        self.b = self.backends.open()
        self.store = self.b.store
        self.figures.examples += 1
        self._serial = 0

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return self.backends.run(coro)

    def step(self, name: str) -> None:
        """Count one executed rule (every rule calls it first)."""
        self.figures.steps += 1
        self.figures.rules[name] = self.figures.rules.get(name, 0) + 1

    def saw(self, event: str) -> None:
        """Count an outcome worth reporting (which cases a run reached)."""
        events = self.figures.events
        events[event] = events.get(event, 0) + 1

    def fresh(self, kind: str) -> str:
        self._serial += 1
        return f"{kind}{self._serial}"

    def teardown(self) -> None:
        self.b.close()


def _settings(*, examples: int, steps: int, derandomize: bool) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=derandomize,
        database=None,
        deadline=None,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def run_machine(
    machine: type[StatefulMachine], backends: Backends, *, examples: int, steps: int
) -> Figures:
    """Short form (derandomized `examples` x `steps`), or with `GATEWAY_STATEFUL_STEPS=N`
    random batches of 50 x 100 until at least N steps ran. Prints the figures."""
    target = int(os.environ.get(STEPS_ENV) or 0)
    figures = Figures()
    machine.backends, machine.figures = backends, figures
    # No example database, and what else Hypothesis keeps goes to the test's temporary
    # folder, never into the working tree.
    set_hypothesis_home_dir(backends.tmp_path / "hypothesis")
    started = time.monotonic()
    try:
        if target <= 0:
            run_state_machine_as_test(
                machine, settings=_settings(examples=examples, steps=steps, derandomize=True)
            )
        while figures.steps < target:
            run_state_machine_as_test(
                machine, settings=_settings(examples=50, steps=100, derandomize=False)
            )
    finally:
        backends.close()
        set_hypothesis_home_dir(None)
    elapsed = time.monotonic() - started
    rules = ", ".join(f"{name} {n}" for name, n in sorted(figures.rules.items()))
    events = ", ".join(f"{name} {n}" for name, n in sorted(figures.events.items()))
    print(
        f"\n{machine.__name__} on {backends.kind}: {figures.examples} examples,"
        f" {figures.steps} steps in {elapsed:.1f} s\n  rules: {rules}\n  outcomes: {events}",
        file=sys.stderr,
    )
    return figures


# The wallet model ------------------------------------------------------------------------


@dataclass
class Hold:
    tenant: str
    units: int
    expires_at: float


class WalletModel:
    """What every tenant's ledger and holds should be."""

    def __init__(self, tenants: tuple[str, ...]) -> None:
        self.tenants = tenants
        self.entries: dict[str, dict[str, tuple[LedgerKind, int]]] = {t: {} for t in tenants}
        self.holds: dict[str, Hold] = {}
        """call_id -> its live hold (settle, release and expiry drop it)."""

    def balance(self, tenant: str) -> int:
        return sum(amount for _, amount in self.entries[tenant].values())

    def held(self, tenant: str, now: float) -> int:
        self.expire(now)
        return sum(h.units for h in self.holds.values() if h.tenant == tenant)

    def available(self, tenant: str, now: float) -> int:
        return self.balance(tenant) - self.held(tenant, now)

    def expire(self, now: float) -> None:
        """A hold stops counting once the clock reaches its expiry."""
        self.holds = {c: h for c, h in self.holds.items() if h.expires_at > now}

    def append(self, tenant: str, entry_id: str, kind: LedgerKind, amount: int) -> bool:
        """False when the entry exists (it never applies twice)."""
        if entry_id in self.entries[tenant]:
            return False
        self.entries[tenant][entry_id] = (kind, amount)
        return True


async def read_ledger(store: Store, tenant: str) -> list[LedgerEntry]:
    """The whole ledger, newest first, in small pages (paging is part of what is checked)."""
    entries: list[LedgerEntry] = []
    after: str | None = None
    while True:
        page = await store.ledger(tenant, limit=7, after=after)
        entries += page.entries
        if not page.has_more:
            return entries
        after = page.entries[-1].id


def check_wallets(
    machine: StatefulMachine, model: WalletModel, late_debits: frozenset[str] = frozenset()
) -> None:
    """The wallet invariants, for every tenant (see the test modules' docstrings).

    `late_debits`: debit ids confirmed after their task's hold had expired, which may take the
    balance below zero (as a chat charge may): every other debit never does."""
    now = machine.b.now
    for tenant in model.tenants:
        wallet = machine.run(machine.store.wallet(tenant))
        entries = machine.run(read_ledger(machine.store, tenant))
        ids = [e.id for e in entries]
        assert len(ids) == len(set(ids)), f"a ledger id twice: {ids}"
        seen = {e.id: (e.kind, e.amount_units) for e in entries}
        assert seen == model.entries[tenant], (tenant, seen, model.entries[tenant])
        assert wallet.balance_units == sum(e.amount_units for e in entries)
        assert wallet.balance_units == model.balance(tenant)
        assert wallet.held_units == model.held(tenant, now), (
            tenant,
            wallet.held_units,
            model.holds,
        )
        running = 0
        for entry in reversed(entries):  # oldest first
            running += entry.amount_units
            assert entry.balance_after_units == running, entry
            assert entry.tenant == tenant
            if entry.kind == "debit":
                assert entry.amount_units < 0, entry
                assert entry.balance_after_units >= 0 or entry.id in late_debits, entry
        debits = {e.task_id: -e.amount_units for e in entries if e.kind == "debit"}
        for entry in entries:
            if entry.kind == "refund":
                assert entry.id == f"refund:{entry.task_id}", entry
                assert 0 < entry.amount_units <= debits.get(entry.task_id, 0), entry
