"""An artifact as clients receive it (upload, lookup), for the OpenAPI document:
`gateway.api.artifacts.artifact_view` renders it."""

from __future__ import annotations

from typing import Literal

import msgspec

from gateway.schemas.tasks import Timestamp

__all__ = ["ArtifactView"]


class ArtifactView(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A stored media file. `source`: an upload, a task's output, or a reference ingested for
    a task (`task_id` names the task then)."""

    object: Literal["artifact"]
    artifact_id: str
    filename: str
    mime_type: str
    size_bytes: int
    sha256: str
    source: Literal["upload", "output", "reference"]
    task_id: str | None
    created_at: Timestamp
    expires_at: Timestamp
