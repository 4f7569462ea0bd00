"""The one OpenAI-specific failure: an `{"error": {...}}` object where a completion or a chunk
should be. HTTP statuses go through `providers.status`, transport exceptions through
`providers.http`, as in every adapter.
"""

from __future__ import annotations

from typing import Any

from providers.errors import ProviderError
from providers.status import message_from_error

__all__ = ["error_event"]


def error_event(payload: dict[str, Any]) -> ProviderError:
    """An `{"error": {...}}` object sent inside a 200 answer or stream."""
    message = message_from_error(payload.get("error"))
    return ProviderError(f"upstream reported an error mid-stream: {message or 'no message'}")
