"""GET /v1/artifacts/{id} (metadata) and GET /v1/artifacts/{id}/content (the bytes, with the
API key or with the signed `expires` and `signature` of a task output's URL)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from litestar import Request, get
from litestar.response import Stream

from gateway.api.dependencies import authenticate
from gateway.auth import Caller
from gateway.context import context_of
from gateway.resources import Resources
from gateway.store.base import ArtifactRecord

__all__ = ["HANDLERS", "artifact_view"]


def artifact_view(record: ArtifactRecord) -> dict[str, Any]:
    return {
        "object": "artifact",
        "artifact_id": record.artifact_id,
        "filename": record.filename,
        "mime_type": record.mime_type,
        "size_bytes": record.size_bytes,
        "sha256": record.sha256,
        "source": record.kind,
        "task_id": record.task_id,
        "created_at": _iso(record.created_at),
        "expires_at": _iso(record.expires_at),
    }


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


@get("/v1/artifacts/{artifact_id:str}")
async def get_artifact(caller: Caller, resources: Resources, artifact_id: str) -> dict[str, Any]:
    return artifact_view(await resources.artifacts.get(caller.tenant.name, artifact_id))


@get("/v1/artifacts/{artifact_id:str}/content")
async def get_content(
    request: Request[Any, Any, Any], resources: Resources, artifact_id: str
) -> Stream:
    expires, signature = request.query_params.get("expires"), request.query_params.get("signature")
    if expires is not None and signature is not None and expires.isdigit():
        record = await resources.artifacts.get_signed(artifact_id, int(expires), signature)
    else:
        ctx = context_of(request.scope)
        caller = await authenticate(ctx, resources)
        ctx.rate = await resources.gatekeeper.check(caller, ctx.request_id)
        record = await resources.artifacts.get(caller.tenant.name, artifact_id)
    return Stream(
        await resources.artifacts.content(record),
        media_type=record.mime_type,
        headers={
            "Content-Length": str(record.size_bytes),
            "Content-Disposition": f'inline; filename="{record.filename}"',
            "Cache-Control": "private, max-age=3600",
        },
    )


HANDLERS = [get_artifact, get_content]
