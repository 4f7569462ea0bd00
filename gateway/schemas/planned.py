"""The Planned part of the public API: paths that exist in the product's direction, each with
the capability it belongs to. They answer 501 `not_implemented` (`gateway.api.planned`), a
WebSocket handshake to one of them too (`gateway.http.upgrades`)."""

from __future__ import annotations

__all__ = ["PLANNED_PATHS", "planned_feature"]

PLANNED_PATHS = {
    "/v1/audio/speech": "audio/speech",
    "/v1/audio/voices": "audio/voices",
    "/v1/audio/transcriptions": "audio/transcriptions",
    "/v1/audio/translations": "audio/translations",
    "/v1/videos": "video",
    "/v1/video/generations": "video",
    "/v1/realtime": "realtime",
    "/v1/realtime/sessions": "realtime",
    "/v1/uploads/resumable": "resumable uploads",
}


def planned_feature(path: str) -> str | None:
    """The Planned capability `path` belongs to, if it is one of theirs."""
    return PLANNED_PATHS.get(path.rstrip("/"))
