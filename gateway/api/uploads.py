"""POST /v1/uploads (Preview): one file as multipart/form-data, streamed to storage: 201."""

from __future__ import annotations

from typing import Any

from litestar import Request, post

from gateway.api.artifacts import artifact_view
from gateway.api.openapi.doc import Content, OperationDoc, documented
from gateway.api.resources import Resources
from gateway.artifacts.service import UPLOAD_MAX_BYTES
from gateway.auth import Caller
from gateway.schemas.artifacts import ArtifactView

__all__ = ["HANDLERS"]

_MULTIPART_SLACK = 64 * 1024
"""Room for the multipart framing around a file of the maximum size."""


_FORM = Content(
    "multipart/form-data",
    {
        "type": "object",
        "required": ["file"],
        "properties": {
            "file": {
                "type": "string",
                # `format: binary` is what client generators read as a file (OpenAPI 3.0's
                # word); `contentMediaType` is 3.1's.
                "format": "binary",
                "contentMediaType": "application/octet-stream",
                "description": "An image (PNG, JPEG, WebP, GIF) or audio file (WAV, MP3, FLAC, "
                "OGG, M4A), recognized by its bytes; at most 100 MB.",
            }
        },
    },
)


@post(
    "/v1/uploads",
    status_code=201,
    request_max_body_size=UPLOAD_MAX_BYTES + _MULTIPART_SLACK,
    opt=documented(
        OperationDoc(
            summary="Upload a file",
            tag="Uploads",
            release="Preview",
            body=_FORM,
            responses={201: ArtifactView},
            errors=(422,),
            description="One file as the part named `file`, streamed to storage; the "
            "artifact id can be a reference of later tasks. Other media types: 415.",
        )
    ),
)
async def upload(
    request: Request[Any, Any, Any], caller: Caller, resources: Resources
) -> dict[str, Any]:
    record = await resources.artifacts.upload(
        caller.tenant.name, request.headers.get("content-type"), request.stream()
    )
    return artifact_view(record)


HANDLERS = [upload]
