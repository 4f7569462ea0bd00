"""The one OpenAI-specific failure: an `{"error": {...}}` object where a completion or a chunk
should be. HTTP statuses go through `providers.status`, transport exceptions through
`providers.http`, as in every adapter.
"""

from __future__ import annotations

from typing import Any

import msgspec

from providers.errors import ProviderError
from providers.status import message_from_error
from providers.upstream import json_instead_of_stream

__all__ = ["error_event", "not_a_stream"]


def error_event(payload: dict[str, Any]) -> ProviderError:
    """An `{"error": {...}}` object sent inside a 200 answer or stream."""
    message = message_from_error(payload.get("error"))
    return ProviderError(f"upstream reported an error mid-stream: {message or 'no message'}")


def not_a_stream(raw: bytes) -> ProviderError:
    """A 2xx JSON answer to a stream request: its error object, if it is one."""
    try:
        decoded = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        decoded = None
    if isinstance(decoded, dict) and "error" in decoded:
        return error_event(decoded)
    return json_instead_of_stream(raw)
