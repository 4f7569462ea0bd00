"""The store's types for task callbacks: a task's delivery state and a tenant's signing secret.

A task created with a callback carries a `TaskCallback`. The step that makes the task terminal
(finalize, cancel of a queued task, out of attempts) schedules its delivery in the same atomic
write: status `pending`, due now. Delivery workers `claim_callbacks` the due ones under a lease
(the schedule entry moves to the lease's end, and the callback gets a fresh `lease_token`), and
`record_callback_attempt` applies an attempt's outcome only under that token, so no two
attempts of one callback ever run at once, and one whose worker vanished is claimed again
once its lease ran out. What to do after an attempt (the retry schedule) is the caller's.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = [
    "CALLBACK_OPEN",
    "CallbackAttempt",
    "CallbackSecrets",
    "CallbackStatus",
    "TaskCallback",
]

CallbackStatus = Literal["pending", "delivered", "retrying", "failed", "disabled"]
CALLBACK_OPEN: tuple[CallbackStatus, ...] = ("pending", "retrying")
"""Statuses of a callback still to be attempted (once its task ended)."""


class TaskCallback(msgspec.Struct, kw_only=True, frozen=True):
    """A task's callback and its delivery state.

    `callback_id` (`cb_...`) is the `webhook-id` of every attempt. `next_attempt_at` is set
    once the delivery is scheduled (the task ended). `lease_token` and `lease_until` belong to
    the worker attempting it now; `once` marks a redelivery (its failure is final)."""

    url: str
    callback_id: str
    status: CallbackStatus = "pending"
    attempt_count: int = 0
    delivered_at: float | None = None
    last_error: str | None = None
    next_attempt_at: float | None = None
    lease_token: str | None = None
    lease_until: float | None = None
    once: bool = False


class CallbackAttempt(msgspec.Struct, kw_only=True, frozen=True):
    """An attempt's outcome, applied only while `lease_token` still holds the callback.

    `status`: `delivered`, `retrying` (again at `next_attempt_at`), `failed` or `disabled`."""

    tenant: str
    task_id: str
    lease_token: str
    status: CallbackStatus
    next_attempt_at: float | None = None
    last_error: str | None = None


class CallbackSecrets(msgspec.Struct, kw_only=True, frozen=True):
    """A tenant's signing secret (`whsec_...`), and the one it replaced while that one is
    still sent (`previous_until`)."""

    tenant: str
    secret: str
    created_at: float
    previous: str | None = None
    previous_until: float | None = None
