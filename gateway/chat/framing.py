"""How a streamed answer is framed for its client: given to the chat service by the HTTP edge.

The service frames each chunk as it goes out because an idempotent stream keeps its frames as
its reply (replayed as is); which frames they are is the client dialect's, so the edge passes
its framer in (`gateway.http.openai_sse` for OpenAI's Server-Sent Events) and nothing here knows
HTTP.
"""

from __future__ import annotations

from typing import Any, Protocol

from gateway.errors import GatewayError

__all__ = ["StreamFramer"]


class StreamFramer(Protocol):
    @property
    def content_type(self) -> str:
        """The media type of the framed stream (kept with a stored reply)."""
        ...

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        """One chat.completion.chunk (the gateway's id and model already in it)."""
        ...

    def error(self, error: GatewayError, request_id: str) -> bytes:
        """The last frame of a stream that broke after it began."""
        ...

    def end(self) -> bytes:
        """The last frame of a stream that completed."""
        ...
