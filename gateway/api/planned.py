"""Planned capabilities: known paths that answer 501 with their release label.

Not in the OpenAPI document: the spec's public description lists only callable endpoints."""

from __future__ import annotations

from typing import Any

from litestar import Request, route

from gateway.errors import NotImplementedYet

__all__ = ["HANDLERS", "planned", "planned_feature"]

_PLANNED = {
    "/v1/embeddings": "embeddings",
    "/v1/audio/speech": "audio/speech",
    "/v1/audio/voices": "audio/voices",
    "/v1/audio/transcriptions": "audio/transcriptions",
    "/v1/audio/translations": "audio/translations",
    "/v1/videos": "video",
    "/v1/video/generations": "video",
    "/v1/realtime": "realtime",
    "/v1/realtime/sessions": "realtime",
    "/v1/uploads/resumable": "resumable uploads",
    "/v1/callbacks": "callbacks",
}


def planned_feature(path: str) -> str | None:
    """The Planned capability `path` belongs to, if it is one of theirs."""
    return _PLANNED.get(path.rstrip("/"))


@route(
    list(_PLANNED), http_method=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False
)
async def planned(request: Request[Any, Any, Any]) -> None:
    feature = planned_feature(request.url.path) or "this capability"
    raise NotImplementedYet(f"The {feature} API is Planned and not callable yet.")


HANDLERS = [planned]
