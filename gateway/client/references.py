"""Reference inputs as a caller gives them (an id, a URL, a data URI, an artifact) and as the
API takes them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.client.models import Artifact

__all__ = ["Reference", "reference"]

Reference = str | Artifact | Mapping[str, Any]
"""An artifact id (`art_...`), an `https://` URL, a `data:` URI, an `Artifact`, or the API's
own `{"type": ..., ...}` object."""


def reference(value: Reference) -> dict[str, Any]:
    """The API's reference object for an image or audio input."""
    if isinstance(value, Artifact):
        return {"type": "artifact", "artifact_id": value.artifact_id}
    if isinstance(value, Mapping):
        return dict(value)
    if value.startswith("data:"):
        return {"type": "data_uri", "data_uri": value}
    if value.startswith(("https://", "http://")):
        return {"type": "url", "url": value}
    return {"type": "artifact", "artifact_id": value}
