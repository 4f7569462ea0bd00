"""POST /v1/uploads (Preview): one file as multipart/form-data, streamed to storage: 201."""

from __future__ import annotations

from typing import Any

from litestar import Request, post

from gateway.api.artifacts import artifact_view
from gateway.artifacts.service import UPLOAD_MAX_BYTES
from gateway.auth import Caller
from gateway.resources import Resources

__all__ = ["HANDLERS"]

_MULTIPART_SLACK = 64 * 1024
"""Room for the multipart framing around a file of the maximum size."""


@post(
    "/v1/uploads",
    status_code=201,
    request_max_body_size=UPLOAD_MAX_BYTES + _MULTIPART_SLACK,
)
async def upload(
    request: Request[Any, Any, Any], caller: Caller, resources: Resources
) -> dict[str, Any]:
    record = await resources.artifacts.upload(
        caller.tenant.name, request.headers.get("content-type"), request.stream()
    )
    return artifact_view(record)


HANDLERS = [upload]
