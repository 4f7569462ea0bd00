"""A task create's reference inputs: checked before anything is charged, written after.

Every reference is checked when the create arrives, so a bad one is a 422 that writes and
charges nothing: an artifact must exist, be the tenant's, of the right type and within the
reference cap; a data URI is decoded (strictly, within the cap: the request body bounds it)
and sniffed, and an image's pixels read from its header are within the cap (nothing is
decoded); a URL must be one that could be fetched (the worker fetches it later, it can take
its time). Only once the store took the create are the data URIs written, as artifacts whose ids
the task's input already names, so a request refused by a rate limit, the wallet or an
idempotent replay leaves no blob behind; and a create that fails after that removes what it
wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.artifacts.data_uri import DecodedData, decode_data_uri
from gateway.artifacts.service import MEDIA_TYPES, REFERENCE_MAX_BYTES, ArtifactService
from gateway.ids import new_artifact_id
from gateway.logging import get_logger
from gateway.store.base import ArtifactRecord

__all__ = ["CheckedReference", "check_reference", "discard_references", "save_references"]

_log = get_logger("gateway.tasks")


@dataclass(frozen=True, slots=True)
class CheckedReference:
    echo: dict[str, Any]
    """What the task's input shows for it: `{"type": "artifact", "artifact_id": ...}`, or the
    URL reference as given."""
    data: DecodedData | None = None
    """A data URI's bytes, to be written as artifact `echo["artifact_id"]` once admitted."""


async def check_reference(
    artifacts: ArtifactService, tenant: str, reference: dict[str, Any], *, field: str, kind: str
) -> CheckedReference:
    """A 422 naming `field` for a reference that could never be used; nothing is written."""
    source = reference["type"]
    if source == "url":
        artifacts.check_url(str(reference["url"]), field=f"{field}.url")
        return CheckedReference(echo=reference)
    if source == "artifact":  # (ingesting an artifact reference only checks it)
        record = await artifacts.ingest(tenant, reference, field=field, kind=kind)
        return CheckedReference(echo={"type": "artifact", "artifact_id": record.artifact_id})
    decoded = decode_data_uri(
        str(reference["data_uri"]),
        field=f"{field}.data_uri",
        allowed_types=MEDIA_TYPES[kind],
        max_bytes=REFERENCE_MAX_BYTES[kind],
    )
    artifacts.check_image(decoded, field=f"{field}.data_uri")
    return CheckedReference(
        echo={"type": "artifact", "artifact_id": new_artifact_id()}, data=decoded
    )


async def save_references(
    artifacts: ArtifactService, tenant: str, task_id: str, checked: Sequence[CheckedReference]
) -> None:
    """Write the data URIs as the artifacts the task names; all of them or (raising) none."""
    saved: list[ArtifactRecord] = []
    try:
        for reference in checked:
            if reference.data is not None:
                artifact_id = str(reference.echo["artifact_id"])
                saved.append(
                    await artifacts.save_reference(
                        tenant, artifact_id, reference.data, task_id=task_id
                    )
                )
    except BaseException:
        await discard_references(artifacts, saved)
        raise


async def discard_references(artifacts: ArtifactService, saved: Sequence[ArtifactRecord]) -> None:
    """Remove what a create wrote before it failed; what cannot be removed now expires."""
    for record in saved:
        try:
            await artifacts.delete(record)
        except Exception as exc:  # the store may be away: the retention sweep removes it later
            _log.warning(
                "reference_discard_failed", artifact_id=record.artifact_id, error=repr(exc)
            )
