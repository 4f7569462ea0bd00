"""What the task tests of the store share: a task create, its idempotency claim, and checks that
the wallet stays the sum of its ledger."""

from __future__ import annotations

import time
from typing import Any

from gateway.store.base import (
    IdempotencyClaim,
    RateLimits,
    Store,
    TaskCreate,
    TaskCreateOutcome,
    TaskRecord,
)
from tests.store.support import Run, claim, create_confirmed

__all__ = [
    "CREATED",
    "REPLAY",
    "SHORT",
    "balanced",
    "create",
    "lapse",
    "ledger_by_id",
    "made",
    "task_claim",
]


CREATED = TaskCreateOutcome.CREATED
REPLAY = TaskCreateOutcome.REPLAY
SHORT = 1.0
"""A lease short enough to run out during a test (slept past with `lapse`), and long enough to
outlast a few claims on a loaded machine (0.3 s did not: with a third of the machine's CPU, a
worker's first lease ran out before its third claim, which took that task again). On Redis a
vanished worker's entry is found once idle for the claimer's lease (workers share one lease
setting), so the reclaiming worker uses it too."""


def create(
    task_id: str,
    *,
    tenant: str = "t1",
    price: int = 100,
    capability: str = "text_to_image",
    rpm: int = 1000,
    idempotency: IdempotencyClaim | None = None,
) -> TaskCreate:
    return TaskCreate(
        task_id=task_id,
        tenant=tenant,
        api_key_id="k1",
        request_id=f"req_{task_id}",
        limits=RateLimits(requests_per_minute=rpm),
        capability=capability,
        model="auto",
        resolved_model="image-model-2",
        price_units=price,
        input={"prompt": "a red fox", "n": 1, "strength": 0.5},
        metadata={"job": task_id},
        idempotency=idempotency,
    )


def task_claim(fingerprint: str = "fp-a") -> IdempotencyClaim:
    return claim("t1:POST:/v1/images/generations:key-1", fingerprint)


def made(store: Store, run: Run, c: TaskCreate) -> TaskRecord:
    result = run(create_confirmed(store, c))
    assert result.outcome is CREATED and result.task is not None
    return result.task


def balanced(store: Store, run: Run, tenant: str = "t1") -> int:
    """The balance, asserted equal to the sum of the tenant's whole ledger."""
    entries = run(store.ledger(tenant, limit=1000)).entries
    balance = run(store.wallet(tenant)).balance_units
    assert balance == sum(e.amount_units for e in entries)
    return balance


def ledger_by_id(store: Store, run: Run, tenant: str = "t1") -> dict[str, Any]:
    return {e.id: e for e in run(store.ledger(tenant, limit=1000)).entries}


def lapse() -> None:
    time.sleep(SHORT + 0.2)  # the behaviour under test: the short lease runs out
