"""The task API's resources as the client reads them: typed, decoded once, lenient.

The endpoints are Preview, so fields the client does not know are ignored rather than refused,
and every field a later version might drop has a default. Money stays Decimal; times are
timezone-aware datetimes.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

import msgspec

__all__ = [
    "TERMINAL_STATUSES",
    "Artifact",
    "Billing",
    "Clip",
    "Image",
    "Links",
    "Progress",
    "Task",
    "TaskError",
    "TaskOutput",
    "TaskPage",
    "TaskStatus",
    "TaskWarning",
    "Usage",
    "UsageLine",
]

TaskStatus = Literal["queued", "running", "succeeded", "failed", "canceled"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "canceled"})


class Progress(msgspec.Struct, kw_only=True):
    percent: float = 0.0
    stage: str | None = None
    message: str | None = None


class TaskError(msgspec.Struct, kw_only=True):
    """Why a task failed (inside the envelope; the request itself succeeded)."""

    code: str
    message: str = ""
    retryable: bool = False


class TaskWarning(msgspec.Struct, kw_only=True):
    code: str
    message: str = ""
    field: str | None = None


class Image(msgspec.Struct, kw_only=True):
    """One image of `output.images`; `url` is signed and expires."""

    artifact_id: str
    url: str
    format: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = None
    width: int | None = None
    height: int | None = None


class Clip(msgspec.Struct, kw_only=True):
    """One clip of `output.clips`; `audio_url` is signed and expires."""

    artifact_id: str
    audio_url: str
    format: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = None
    duration_seconds: float | None = None
    title: str | None = None


class TaskOutput(msgspec.Struct, kw_only=True):
    """Empty until the task succeeds."""

    type: str | None = None
    model: str | None = None
    images: list[Image] = []
    clips: list[Clip] = []


class UsageLine(msgspec.Struct, kw_only=True):
    meter: str
    quantity: str
    unit: str
    billed_amount_credits: Decimal
    billed_amount_credits_usd_reference: Decimal | None = None


class Usage(msgspec.Struct, kw_only=True):
    credits: Decimal = Decimal(0)
    credits_usd_reference: Decimal | None = None
    lines: list[UsageLine] = []
    image_count: int | None = None
    image_pixels: int | None = None
    audio_seconds: float | None = None


class Billing(msgspec.Struct, kw_only=True):
    charged_credits: Decimal = Decimal(0)
    refunded_credits: Decimal = Decimal(0)
    charged_credits_usd_reference: Decimal | None = None
    refunded_credits_usd_reference: Decimal | None = None
    currency: str = "USD"


class Links(msgspec.Struct, kw_only=True):
    self: str | None = None
    cancel: str | None = None


class Task(msgspec.Struct, kw_only=True):
    """The task envelope (create, lookup, cancel, list)."""

    object: str = "task"
    task_id: str
    status: TaskStatus
    capability: str
    model: str | None = None
    resolved_model: str | None = None
    metadata: dict[str, str] = {}
    input: dict[str, Any] = {}
    progress: Progress = msgspec.field(default_factory=Progress)
    output: TaskOutput = msgspec.field(default_factory=TaskOutput)
    warnings: list[TaskWarning] = []
    error: TaskError | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    billing: Billing = msgspec.field(default_factory=Billing)
    created_at: datetime | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    cancel_requested_at: datetime | None = None
    links: Links = msgspec.field(default_factory=Links)

    @property
    def terminal(self) -> bool:
        """True once the status is `succeeded`, `failed` or `canceled`; it never changes then."""
        return self.status in TERMINAL_STATUSES


class TaskPage(msgspec.Struct, kw_only=True):
    """One page of `GET /v1/tasks`, newest first; `next_after` continues it."""

    object: str = "list"
    data: list[Task]
    has_more: bool = False
    next_after: str | None = None


class Artifact(msgspec.Struct, kw_only=True):
    """A stored file: an upload, an ingested reference or a task output."""

    object: str = "artifact"
    artifact_id: str
    filename: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = None
    sha256: str | None = None
    source: str | None = None
    task_id: str | None = None
    created_at: datetime | None = None
    expires_at: datetime | None = None
