"""The store's types for tasks (image and music generation) and artifacts (stored media).

A task is prepaid, and created in two steps so that a create whose answer was lost can be
undone (see docs/store.md, "When a step's outcome is unknown"): `Store.create_task` writes it
*unconfirmed* under a credit hold of its price (not claimable, nothing charged), and
`Store.confirm_task` turns the hold into the `debit:<task_id>` entry and enqueues it; or
`Store.abandon_task` removes an unconfirmed task whole and fences its id, so a create that
reaches the store late takes nothing. `Store.finalize_task` refunds what was not delivered,
once per task (`refund:<task_id>`). A worker holds a running task under a lease it keeps
extending (`touch_task`); a task whose worker vanished is claimed again, or failed with a full
refund once it ran out of attempts.

`base.py` re-exports all of these; they live apart only to keep each module small.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

import msgspec

from gateway.store.callbacks import TaskCallback
from gateway.store.records import IdempotencyClaim, KeyBudget, RateLimits, RateState

__all__ = [
    "TASK_RETENTION_SECONDS",
    "TERMINAL",
    "WORKER_LOST",
    "ArtifactKind",
    "ArtifactRecord",
    "TaskAbandon",
    "TaskConfirm",
    "TaskCreate",
    "TaskCreateOutcome",
    "TaskCreateResult",
    "TaskFinal",
    "TaskPage",
    "TaskProgress",
    "TaskRecord",
    "TaskStatus",
    "TerminalStatus",
    "worker_lost_error",
]

TaskStatus = Literal["queued", "running", "succeeded", "failed", "canceled"]
TerminalStatus = Literal["succeeded", "failed", "canceled"]
TERMINAL: tuple[TerminalStatus, ...] = ("succeeded", "failed", "canceled")
"""A task in one of these never changes again (and is never refunded twice)."""

TASK_RETENTION_SECONDS = 30 * 86_400.0
"""How long a task is kept once it ended, unless the store is told otherwise
(`Store.set_task_retention`, from `task_retention_days`); queued and running tasks stay."""

WORKER_LOST = "worker_lost"
"""Error code (and refund reason) of a task failed because its workers kept vanishing."""


def worker_lost_error() -> dict[str, Any]:
    """The error `claim_task` gives a task whose last allowed attempt's worker vanished."""
    return {
        "code": WORKER_LOST,
        "message": "the workers running this task kept stopping; it was refunded in full",
        "retryable": True,
    }


ArtifactKind = Literal["upload", "output", "reference"]


class TaskProgress(msgspec.Struct, kw_only=True, frozen=True):
    percent: float = 0.0
    stage: str = "queued"
    message: str = ""


class TaskRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A task as the store keeps it; the API's task envelope is rendered from it.

    `request_id` is the X-Request-Id of the create call. `resolved_model` is what `model`
    (perhaps `auto`) resolved to. `lease_until` and `worker_id` belong to the worker that runs
    it; `attempts` counts claims (a worker that vanished costs one).
    """

    task_id: str
    tenant: str
    api_key_id: str
    request_id: str
    capability: str
    model: str
    resolved_model: str
    status: TaskStatus
    input: dict[str, Any]
    metadata: dict[str, str]
    price_units: int
    refunded_units: int = 0
    progress: TaskProgress
    output: dict[str, Any] = {}
    error: dict[str, Any] | None = None
    usage: dict[str, Any] = {}
    warnings: list[dict[str, str]] = []
    created_at: float
    started_at: float | None = None
    completed_at: float | None = None
    cancel_requested_at: float | None = None
    attempts: int = 0
    worker_id: str | None = None
    lease_until: float | None = None
    callback: TaskCallback | None = None
    """Set when the create asked for one (`gateway.store.callbacks`)."""


class TaskCreate(msgspec.Struct, kw_only=True, frozen=True):
    """What a create call asks of the store: rate check, idempotency, credit hold, the task.

    `task_id` is gateway-made and unique per call; the same create sent again (a client
    library's retry of the same command) finds its own task and takes nothing twice.
    """

    task_id: str
    tenant: str
    api_key_id: str
    request_id: str
    limits: RateLimits
    capability: str
    model: str
    resolved_model: str
    price_units: int
    input: dict[str, Any]
    metadata: dict[str, str]
    idempotency: IdempotencyClaim | None = None
    budget: KeyBudget | None = None
    """The key's budget: the price must fit in it as well as in the wallet."""
    reply_ttl_seconds: int = 86_400
    """How long the idempotency record (fingerprint -> task id) is kept."""
    hold_seconds: int = 900
    """How long the price stays held if the task is never confirmed (a gateway that died
    between the two steps): its record goes too, by `Store.abandon_unconfirmed`."""
    callback: TaskCallback | None = None
    """The callback to deliver when the task ends (status `pending`, not scheduled yet)."""


class TaskCreateOutcome(enum.Enum):
    CREATED = "created"
    """The task exists, unconfirmed (also when this same create had reached the store before)."""
    REPLAY = "replay"
    """Same idempotency key and body: the confirmed task, as it is now."""
    IN_PROGRESS = "in_progress"
    """Same idempotency key and body as a create not confirmed yet: nothing taken but a request."""
    KEY_REUSED = "key_reused"
    RATE_LIMITED = "rate_limited"
    INSUFFICIENT_CREDITS = "insufficient_credits"
    KEY_BUDGET_EXCEEDED = "key_budget_exceeded"
    ABANDONED = "abandoned"
    """This task id was abandoned before the create reached the store: nothing was taken."""


class TaskConfirm(msgspec.Struct, kw_only=True, frozen=True):
    """Make an unconfirmed task real: its hold becomes the debit, it is queued for workers."""

    tenant: str
    task_id: str


class TaskAbandon(msgspec.Struct, kw_only=True, frozen=True):
    """Undo a create whose answer never came: an unconfirmed task goes whole (hold, record,
    idempotency record), and the id is fenced so that a create arriving later takes nothing.

    `idempotency_scope` is the create's claim scope ("" without one)."""

    tenant: str
    task_id: str
    idempotency_scope: str = ""


class TaskCreateResult(msgspec.Struct, kw_only=True, frozen=True):
    outcome: TaskCreateOutcome
    rate: RateState
    task: TaskRecord | None = None
    """The new, unconfirmed task (CREATED) or the existing one (REPLAY); None otherwise."""
    available_units: int = 0
    """Balance minus active holds when checked, before this task's own hold."""


class TaskFinal(msgspec.Struct, kw_only=True, frozen=True):
    """How a task ended. `refund_units` (0 to the price) goes back to the wallet, once.
    `tenant` is the task's (the worker has it from the claim): another's is an unknown task."""

    tenant: str
    task_id: str
    status: TerminalStatus
    output: dict[str, Any] = {}
    error: dict[str, Any] | None = None
    usage: dict[str, Any] = {}
    warnings: list[dict[str, str]] = []
    refund_units: int = 0
    reason: str = ""
    """Kept on the refund's ledger entry."""


class TaskPage(msgspec.Struct, kw_only=True, frozen=True):
    tasks: list[TaskRecord]
    has_more: bool


class ArtifactRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A stored media file's metadata; the bytes live in blob storage under `blob_key`."""

    artifact_id: str
    tenant: str
    kind: ArtifactKind
    filename: str
    mime_type: str
    size_bytes: int
    sha256: str
    blob_key: str
    created_at: float
    expires_at: float
    task_id: str | None = None
    """The task that produced (output) or ingested (reference) it."""
