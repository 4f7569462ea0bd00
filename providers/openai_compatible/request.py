"""The gateway's OpenAI body -> what one OpenAI-compatible server takes.

Built once per provider (`RequestShape`), applied per call: a rename and a few deletions on a
shallow copy of the body (the caller's stays as it was), nothing when the server takes
OpenAI's body as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["RequestShape"]


class RequestShape:
    """What to change in a body for one server (the options of the same names)."""

    __slots__ = ("_drop", "_rename", "_stream_options", "changes")

    def __init__(
        self, *, max_tokens_field: str, stream_options: bool, drop_fields: Sequence[str] = ()
    ) -> None:
        self._rename = max_tokens_field != "max_completion_tokens"
        self._stream_options = stream_options
        self._drop = tuple(drop_fields)
        self.changes = self._rename or not self._stream_options or bool(self._drop)
        """False when bodies go out as they came (the common case: nothing is done)."""

    def apply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body for the server: `body` itself when nothing changes, else a changed copy."""
        if not self.changes:
            return body
        body = dict(body)
        if self._rename and "max_completion_tokens" in body:
            limit = body.pop("max_completion_tokens")
            body.setdefault("max_tokens", limit)
        if not self._stream_options:
            body.pop("stream_options", None)
        for name in self._drop:
            body.pop(name, None)
        return body
