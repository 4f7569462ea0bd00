"""How an answer reaches its client: the dialect's framing, given to the chat service by the
HTTP edge.

The service frames each chunk as it goes out because an idempotent stream keeps its frames as
its reply (replayed as is); which frames they are is the client dialect's, so the edge passes
its dialect in (`gateway.chat.dialect`) and nothing here knows HTTP. A dialect whose events
open and close things (Anthropic's content blocks) keeps state across a stream, so a framer
is made per stream.
"""

from __future__ import annotations

from typing import Any, Protocol

from gateway.errors import GatewayError

__all__ = ["StreamFramer"]


class StreamFramer(Protocol):
    """One stream's framing (made for it by `ChatDialect.framer` or `NativeRequest.framer`).

    A framer whose first event reports the prompt's counts (Anthropic's `message_start`) also
    has `opening_usage(usage: providers.base.Usage | None)`, called once before the first
    chunk with what the upstream reported so far."""

    @property
    def content_type(self) -> str:
        """The media type of the framed stream (kept with a stored reply)."""
        ...

    @property
    def wants_usage(self) -> bool:
        """Whether `end` needs the final usage chunk (it costs a little to build)."""
        ...

    def chunk(self, chunk: dict[str, Any]) -> bytes | None:
        """One upstream chunk framed (a chat.completion.chunk with the gateway's id and model
        already in it, or a native event as the upstream sent it); None when nothing is to
        be sent for it yet."""
        ...

    def error(self, error: GatewayError, request_id: str) -> bytes:
        """The last frame of a stream that broke after it began."""
        ...

    def end(self, usage: dict[str, Any] | None) -> bytes:
        """The last frames of a stream that completed; `usage` is the final usage chunk (a
        chat.completion.chunk whose `usage` has the credits) when `wants_usage`."""
        ...
