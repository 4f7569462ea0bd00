"""The task envelope as clients receive it (create, lookup, cancel, list), for the OpenAPI
document: `gateway.api.task_view` renders it, and tests check real envelopes against the schema
made from these Structs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

__all__ = [
    "TaskBilling",
    "TaskCallback",
    "TaskError",
    "TaskLinks",
    "TaskList",
    "TaskProgress",
    "TaskUsage",
    "TaskUsageLine",
    "TaskView",
    "TaskWarning",
    "Timestamp",
]

TaskStatus = Literal["queued", "running", "succeeded", "failed", "canceled"]
Timestamp = Annotated[str, Meta(extra_json_schema={"format": "date-time"})]
Capability = Literal["text_to_image", "image_to_image", "text_to_music", "reference_audio_to_music"]


class _Closed(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An object with exactly these fields (the schema says `additionalProperties: false`)."""


class TaskProgress(_Closed):
    percent: float
    stage: str
    message: str


class TaskWarning(_Closed):
    code: str
    message: str
    field: str


class TaskError(_Closed):
    """Present on failure; a failed task is refunded in full."""

    code: str
    message: str
    retryable: bool


class TaskUsageLine(_Closed):
    """One billed line (the debit at creation, a refund), amounts as decimal strings."""

    meter: str
    quantity: str
    unit: str
    billed_amount_credits: str
    billed_amount_credits_usd_reference: str


class TaskUsage(msgspec.Struct, kw_only=True):
    """What the model used (`image_count`, `image_pixels`, `audio_seconds`, ... once known)
    and what it cost."""

    lines: list[TaskUsageLine]
    credits: str
    credits_usd_reference: str
    image_count: int | None = None
    image_pixels: int | None = None
    audio_seconds: float | None = None


class TaskBilling(_Closed):
    charged_credits: str
    refunded_credits: str
    charged_credits_usd_reference: str
    refunded_credits_usd_reference: str
    currency: Literal["USD"]


class TaskCallback(_Closed):
    """The task's callback (`callback: {url}` on its create; all null without one) and its
    delivery: `pending` until the task ends and its first attempt is made, then `delivered`,
    `retrying` (again at `next_attempt_at`), `failed` or `disabled` (the receiver answered
    410)."""

    url: str | None
    status: Literal["pending", "delivered", "retrying", "failed", "disabled"] | None
    attempt_count: int
    delivered_at: Timestamp | None
    last_error: str | None
    next_attempt_at: Timestamp | None


class TaskLinks(_Closed):
    self: str
    cancel: str


class TaskView(_Closed):
    """The task envelope. `output` is empty until the task succeeds; then `images[]` (url,
    artifact_id, format, mime_type, size_bytes, width, height) or `clips[]` (audio_url,
    artifact_id, format, mime_type, size_bytes, duration_seconds, title), with `type` and
    `model`. URLs are signed and expire; `GET /v1/tasks/{id}` hands out fresh ones."""

    object: Literal["task"]
    task_id: str
    status: TaskStatus
    capability: Capability
    model: str
    resolved_model: str
    metadata: dict[str, str]
    input: dict[str, Any]
    progress: TaskProgress
    output: dict[str, Any]
    warnings: list[TaskWarning]
    error: TaskError | None
    usage: TaskUsage
    billing: TaskBilling
    callback: TaskCallback
    created_at: Timestamp
    started_at: Timestamp | None
    completed_at: Timestamp | None
    cancel_requested_at: Timestamp | None
    links: TaskLinks


class TaskList(_Closed):
    """Newest first; pass `next_after` as `after` for the next page."""

    object: Literal["list"]
    data: list[TaskView]
    has_more: bool
    next_after: str | None
