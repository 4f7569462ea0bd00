"""The plain Python model of the task lifecycle that tests/store/test_stateful_tasks.py checks
the stores against: its tasks, idempotency records, buckets and fences, what a create must return
(`expect_create`), and the comparison of a stored task with its model (`check_task`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import strategies as st

from gateway.store import buckets
from gateway.store.base import Call, TaskCreate, TaskCreateOutcome, TaskRecord
from tests.store.stateful_support import Hold, StatefulMachine, WalletModel

__all__ = [
    "FINGERPRINTS",
    "HOLD_SECONDS",
    "MAX_ATTEMPTS",
    "PICK",
    "RPM",
    "SCOPES",
    "TENANTS",
    "WORKERS",
    "C",
    "Record",
    "TaskModel",
    "TaskModelMachine",
    "ids",
]

TENANTS = ("t1", "t2")
RPM = {"k-open": 0, "k-tight": 4}


def _rpm(api_key_id: str) -> int:
    """The requests limit of a key named `<key>@<tenant>` (an API key is one tenant's)."""
    return RPM[api_key_id.partition("@")[0]]


WORKERS = ("w1", "w2", "w3")
MAX_ATTEMPTS = 2
SCOPES = ("s0", "s1")
FINGERPRINTS = ("fa", "fb")
PICK = st.integers(min_value=0, max_value=255)

C = TaskCreateOutcome
HOLD_SECONDS = 900
"""An unconfirmed task's hold (`TaskCreate.hold_seconds`)."""


@dataclass
class TaskModel:
    task_id: str
    tenant: str
    price: int
    status: str = "queued"
    attempts: int = 0
    worker: str | None = None
    lease_until: float | None = None
    started: bool = False
    cancel_requested: bool = False
    refunded: int = 0
    percent: float = 0.0
    stage: str = "queued"
    error_code: str | None = None
    unconfirmed: bool = True
    confirmed_as: int = 0
    """Its place in the order of confirmations (Redis queues tasks in that order)."""

    @property
    def terminal(self) -> bool:
        return self.status in ("succeeded", "failed", "canceled")


@dataclass
class Record:
    fingerprint: str
    task_id: str
    expires_at: float


class TaskModelMachine(StatefulMachine):
    """The model and its reading of the state; the rules that drive it are in the test."""

    def __init__(self) -> None:
        super().__init__()
        self.model = WalletModel(TENANTS)
        self.tasks: dict[str, TaskModel] = {}
        """In creation order (the queue's order)."""
        self.records: dict[str, Record] = {}
        self.levels: dict[str, tuple[float, float]] = {}
        self.chats: list[Call] = []
        """Chat calls holding credits."""
        self.fenced: dict[str, float] = {}
        self.fenced_for: dict[str, str] = {}
        """The tenant each id was fenced for (on Redis a fence is the tenant's, as its ids)."""
        """Abandoned task ids -> until when a create of them is ABANDONED."""
        self.late_debits: set[str] = set()
        """Debits confirmed after their hold expired (they may take a balance below zero)."""
        self.confirmations = 0

    # The model's reading of the state ------------------------------------------------------

    def requests_level(self, key: str) -> float:
        if _rpm(key) == 0:
            return math.inf
        level, at = self.levels.get(key, (None, None))
        return buckets.refill(level, at, _rpm(key), self.b.now)

    def take_request(self, key: str, level: float) -> None:
        if _rpm(key) > 0:
            self.levels[key] = (level - 1, self.b.now)

    def record(self, scope: str) -> Record | None:
        rec = self.records.get(scope)
        if rec is not None and self.b.ttl_by_clock and rec.expires_at <= self.b.now:
            del self.records[scope]
            return None
        return rec

    def in_state(self, *states: str) -> list[TaskModel]:
        return [t for t in self.tasks.values() if t.status in states]

    def queued(self) -> list[TaskModel]:
        """Confirmed queued tasks, the ones a worker may claim, in the order they are claimed:
        of creation on SQLite, of confirmation on Redis (a task enters its stream then)."""
        queued = [t for t in self.in_state("queued") if not t.unconfirmed]
        if self.b.kind == "redis":
            queued.sort(key=lambda t: t.confirmed_as)
        return queued

    def is_fenced(self, task_id: str) -> bool:
        return self.fenced.get(task_id, -math.inf) > self.b.now

    def finish(self, task: TaskModel, status: str, refund: int) -> None:
        task.status, task.refunded, task.stage = status, refund, status
        if status == "succeeded":
            task.percent = 100.0
        if refund > 0:
            assert self.model.append(task.tenant, f"refund:{task.task_id}", "refund", refund)

    def check_task(self, seen: TaskRecord | None, task: TaskModel) -> None:
        assert seen is not None, task
        got = (
            seen.status,
            seen.attempts,
            seen.worker_id,
            seen.lease_until,
            seen.started_at is not None,
            seen.cancel_requested_at is not None,
            seen.refunded_units,
            seen.progress.percent,
            seen.progress.stage,
            seen.price_units,
            None if seen.error is None else seen.error.get("code"),
            seen.tenant,
        )
        want = (
            task.status,
            task.attempts,
            task.worker,
            task.lease_until,
            task.started,
            task.cancel_requested,
            task.refunded,
            task.percent,
            task.stage,
            task.price,
            task.error_code,
            task.tenant,
        )
        assert got == want, (task.task_id, got, want)
        assert seen.task_id == task.task_id
        if task.terminal:
            assert seen.completed_at is not None

    # Rules ---------------------------------------------------------------------------------

    def expect_create(
        self, c: TaskCreate, available: int
    ) -> tuple[TaskCreateOutcome | None, TaskModel | None]:
        """Apply `c` to the model (docs/store.md, `create_task`): the outcome (None: refused,
        the id is another tenant's task) and the task a replay finds."""
        key, claim = c.api_key_id, c.idempotency
        if self.is_fenced(c.task_id):
            return C.ABANDONED, None
        level = self.requests_level(key)
        if level < 1:
            return C.RATE_LIMITED, None
        if claim is not None and (rec := self.record(claim.scope)) is not None:
            self.take_request(key, level)
            if rec.fingerprint != claim.fingerprint:
                return C.KEY_REUSED, None
            if self.tasks[rec.task_id].unconfirmed:
                return C.IN_PROGRESS, None
            return C.REPLAY, self.tasks[rec.task_id]
        if c.task_id in self.tasks:
            task = self.tasks[c.task_id]
            if task.tenant != c.tenant:
                return None, None
            self.take_request(key, level)
            if task.unconfirmed:
                return C.CREATED, None
            return C.REPLAY, task
        self.take_request(key, level)
        if c.price_units > 0 and c.price_units > available:
            return C.INSUFFICIENT_CREDITS, None
        if c.price_units > 0:
            self.model.holds[c.task_id] = Hold(c.tenant, c.price_units, self.b.now + HOLD_SECONDS)
        self.tasks[c.task_id] = TaskModel(c.task_id, c.tenant, c.price_units)
        if claim is not None:
            self.records[claim.scope] = Record(
                claim.fingerprint, c.task_id, self.b.now + c.reply_ttl_seconds
            )
        return C.CREATED, None


def ids(tasks: list[TaskModel]) -> set[str]:
    return {t.task_id for t in tasks}
