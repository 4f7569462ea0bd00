"""GET /v1/artifacts/{id} (metadata) and GET /v1/artifacts/{id}/content (the bytes, with the
API key or with the signed `expires` and `signature` of a task output's URL).

A request that carries both `expires` and `signature` is judged by them alone: anything wrong
with either (altered, expired, not a plain decimal number) is the same 404 as an unknown
artifact. One of them without the other is a request with the key, refused (422) once the
key is checked. The download name goes out as RFC 6266 asks: an ASCII `filename` with nothing
that could end the quoted string, and the exact name as UTF-8 in `filename*`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from litestar import Request, get
from litestar.response import Stream

from gateway.api.dependencies import authenticate
from gateway.api.openapi_doc import Content, OperationDoc, documented
from gateway.auth import Caller
from gateway.context import context_of
from gateway.errors import ErrorDetail, NotFound, ValidationFailed
from gateway.resources import Resources
from gateway.schemas.artifacts import ArtifactView
from gateway.store.base import ArtifactRecord

__all__ = ["HANDLERS", "artifact_view", "content_disposition"]

_EXPIRES = re.compile(r"^[0-9]{1,12}$")
"""Epoch seconds in ASCII digits (`str.isdigit` also takes "²", which `int` refuses)."""
_NOT_TOKEN_SAFE = re.compile(r'[^\x20-\x7e]|["\\]')


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


_BYTES = {"type": "string", "contentMediaType": "application/octet-stream"}


@get(
    "/v1/artifacts/{artifact_id:str}",
    opt=documented(
        OperationDoc(
            summary="Get an artifact's record",
            tag="Artifacts",
            release="Preview",
            responses={200: ArtifactView},
            errors=(404,),
            description="Another tenant's artifact is a 404, as if it did not exist.",
        )
    ),
)
async def get_artifact(caller: Caller, resources: Resources, artifact_id: str) -> dict[str, Any]:
    return artifact_view(await resources.artifacts.get(caller.tenant.name, artifact_id))


@get(
    "/v1/artifacts/{artifact_id:str}/content",
    opt=documented(
        OperationDoc(
            summary="Download an artifact's bytes",
            tag="Artifacts",
            release="Preview",
            auth="api_key_or_link",
            responses={200: (Content("image/*", _BYTES), Content("audio/*", _BYTES))},
            errors=(404, 422),
            query={
                "expires": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Of a signed link (with `signature`): no key needed.",
                },
                "signature": {
                    "type": "string",
                    "description": "Of a signed link; `expires` and `signature` come together "
                    "(one alone: the key is needed, and then it is a 422).",
                },
            },
            headers={200: {"Content-Disposition": True, "Cache-Control": True}},
            description="With the API key, or with the `expires` and `signature` of a URL "
            "in a task's output (valid for an hour, no key needed; a wrong or expired one "
            "is a 404).",
        )
    ),
)
async def get_content(
    request: Request[Any, Any, Any], resources: Resources, artifact_id: str
) -> Stream:
    expires, signature = request.query_params.get("expires"), request.query_params.get("signature")
    if expires is not None and signature is not None:
        if not _EXPIRES.match(expires):
            raise NotFound("No such artifact, or the link has expired.")
        record = await resources.artifacts.get_signed(artifact_id, int(expires), signature)
    else:
        ctx = context_of(request.scope)
        caller = await authenticate(ctx, resources)
        ctx.rate = await resources.gatekeeper.check(caller, ctx.request_id)
        if expires is not None or signature is not None:  # half a link: a mistake, not ignored
            missing = "signature" if signature is None else "expires"
            raise ValidationFailed(
                f"A signed link has both expires and signature; {missing} is missing.",
                details=[ErrorDetail(field=missing, message="required with the other")],
            )
        record = await resources.artifacts.get(caller.tenant.name, artifact_id)
    return Stream(
        await resources.artifacts.content(record),
        media_type=record.mime_type,
        headers={
            "Content-Length": str(record.size_bytes),
            "Content-Disposition": content_disposition(record.filename),
            "Cache-Control": "private, max-age=3600",
            "X-Content-Type-Options": "nosniff",
        },
    )


def content_disposition(filename: str) -> str:
    """`inline` with the name: ASCII-safe in `filename`, exact in `filename*` when it differs."""
    fallback = _NOT_TOKEN_SAFE.sub("_", filename) or "download"
    if fallback == filename:
        return f'inline; filename="{filename}"'
    return f"inline; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


HANDLERS = [get_artifact, get_content]
