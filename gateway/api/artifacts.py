"""GET /v1/artifacts/{id} (metadata) and GET and HEAD /v1/artifacts/{id}/content (the bytes,
with the API key or with the signed `expires` and `signature` of a task output's URL; one byte
range of them with `Range`, read from storage alone, so players can seek).

A request that carries both `expires` and `signature` is judged by them alone: anything wrong
with either (altered, expired, not a plain decimal number) is the same 404 as an unknown
artifact. One of them without the other is a request with the key, refused (422) once the
key is checked. The download name goes out as RFC 6266 asks: an ASCII `filename` with nothing
that could end the quoted string, and the exact name as UTF-8 in `filename*`.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from litestar import Request, Response, get, route
from litestar.response import Stream

from gateway.api.dependencies import authenticate
from gateway.api.openapi.doc import Content, OperationDoc, documented
from gateway.api.resources import Resources
from gateway.auth import Caller
from gateway.errors import ErrorDetail, NotFound, ValidationFailed
from gateway.http.byte_range import requested_range
from gateway.http.context import context_of
from gateway.schemas.artifacts import ArtifactView
from gateway.schemas.times import iso
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
        "created_at": iso(record.created_at),
        "expires_at": iso(record.expires_at),
    }


_BYTES = {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}
"""Bytes, said for OpenAPI 3.1 readers (`contentMediaType`) and client generators (`format`)."""


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


_CONTENT_PATH = "/v1/artifacts/{artifact_id:str}/content"
_LINK_QUERY: dict[str, dict[str, Any]] = {
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
}
_BYTES_HEADERS = {
    "Content-Length": True,
    "Accept-Ranges": True,
    "Content-Disposition": True,
    "Cache-Control": True,
}
_MEDIA = (
    Content("application/octet-stream", _BYTES),
    Content("image/*", _BYTES),
    Content("audio/*", _BYTES),
)
"""The content's own type (`image/png`, `audio/wav`, ...); `application/octet-stream` first,
as the one media type client generators turn into a download."""
_ACCESS = (
    "With the API key, or with the `expires` and `signature` of a URL in a task's output "
    "(valid for an hour, no key needed; a wrong or expired one is a 404)."
)


@get(
    _CONTENT_PATH,
    opt=documented(
        OperationDoc(
            summary="Download an artifact's bytes",
            tag="Artifacts",
            release="Preview",
            auth="api_key_or_link",
            responses={200: _MEDIA, 206: _MEDIA},
            errors=(404, 416, 422),
            query=_LINK_QUERY,
            request_headers=("Range", "IfRange"),
            headers={
                200: _BYTES_HEADERS,
                206: {**_BYTES_HEADERS, "Content-Range": True},
                416: {"Content-Range": True},
            },
            description=f"{_ACCESS} One byte range may be asked with `Range` (`bytes=a-b`, "
            "`bytes=a-`, `bytes=-n`): 206 with `Content-Range` and only those bytes; a range "
            "past the end is 416 (`Content-Range: bytes */<size>`). Several ranges, another "
            "unit, a malformed `Range` or any `If-Range` get the whole content (200).",
        )
    ),
)
async def get_content(
    request: Request[Any, Any, Any], resources: Resources, artifact_id: str
) -> Stream:
    record = await _content_record(request, resources, artifact_id)
    headers = _content_headers(record)
    # No validator is sent (no ETag, no Last-Modified), so no If-Range can match: RFC 9110
    # then wants the whole content.
    wanted = (
        None
        if "if-range" in request.headers
        else requested_range(request.headers.get("range"), record.size_bytes)
    )
    if wanted is None:
        content = await resources.artifacts.content(record)
        return Stream(content, media_type=record.mime_type, headers=headers)
    headers["Content-Length"] = str(wanted.length)
    headers["Content-Range"] = wanted.content_range(record.size_bytes)
    content = await resources.artifacts.content_range(record, wanted.start, wanted.stop)
    return Stream(content, status_code=206, media_type=record.mime_type, headers=headers)


@route(
    _CONTENT_PATH,
    http_method=["HEAD"],
    opt=documented(
        OperationDoc(
            summary="An artifact's content headers, without the bytes",
            tag="Artifacts",
            release="Preview",
            auth="api_key_or_link",
            responses={200: None},
            errors=(404, 422),
            query=_LINK_QUERY,
            headers={200: _BYTES_HEADERS},
            description=f"What a GET of the content answers, without a body: its length, type "
            f"and `Accept-Ranges: bytes` (`Range` is not applied to HEAD). {_ACCESS}",
        )
    ),
)
async def head_content(
    request: Request[Any, Any, Any], resources: Resources, artifact_id: str
) -> Response[bytes]:
    record = await _content_record(request, resources, artifact_id)
    return Response(b"", media_type=record.mime_type, headers=_content_headers(record))


async def _content_record(
    request: Request[Any, Any, Any], resources: Resources, artifact_id: str
) -> ArtifactRecord:
    """The artifact a content request may read: by its signed link, or with the key."""
    expires, signature = request.query_params.get("expires"), request.query_params.get("signature")
    if expires is not None and signature is not None:
        if not _EXPIRES.match(expires):
            raise NotFound("No such artifact, or the link has expired.")
        return await resources.artifacts.get_signed(artifact_id, int(expires), signature)
    ctx = context_of(request.scope)
    caller = await authenticate(ctx, resources)
    ctx.rate = await resources.gatekeeper.check(caller, ctx.request_id)
    if expires is not None or signature is not None:  # half a link: a mistake, not ignored
        missing = "signature" if signature is None else "expires"
        raise ValidationFailed(
            f"A signed link has both expires and signature; {missing} is missing.",
            details=[ErrorDetail(field=missing, message="required with the other")],
        )
    return await resources.artifacts.get(caller.tenant.name, artifact_id)


def _content_headers(record: ArtifactRecord) -> dict[str, str]:
    return {
        "Content-Length": str(record.size_bytes),
        "Accept-Ranges": "bytes",
        "Content-Disposition": content_disposition(record.filename),
        "Cache-Control": "private, max-age=3600",
        "X-Content-Type-Options": "nosniff",
    }


def content_disposition(filename: str) -> str:
    """`inline` with the name: ASCII-safe in `filename`, exact in `filename*` when it differs."""
    fallback = _NOT_TOKEN_SAFE.sub("_", filename) or "download"
    if fallback == filename:
        return f'inline; filename="{filename}"'
    return f"inline; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


HANDLERS = [get_artifact, get_content, head_content]
