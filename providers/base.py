"""The narrow contracts an adapter implements: one small Protocol per capability.

Chat speaks the OpenAI chat-completions wire format on both sides: the gateway hands the
adapter a validated request body (a dict, `model` already set to the upstream model name,
`max_completion_tokens` set, and for streams `stream_options.include_usage` forced on), and the
adapter returns OpenAI-format completions and chunks whatever its upstream speaks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

import msgspec

__all__ = [
    "ChatCompletion",
    "ChatProvider",
    "ChatStream",
    "Usage",
]


class Usage(msgspec.Struct, kw_only=True, frozen=True):
    """Token counts the upstream reported (OpenAI names)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ChatCompletion(msgspec.Struct, kw_only=True):
    """`body` is an OpenAI `chat.completion` object with every field the upstream gave."""

    body: dict[str, Any]
    usage: Usage


class ChatStream(Protocol):
    """One streamed call: iterate OpenAI `chat.completion.chunk` dicts as they arrive.

    `usage` is set once the upstream reported it (normally in the last chunk). `aclose()` stops
    the upstream request (client went away); it is safe to call twice.
    """

    usage: Usage | None

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...
    async def aclose(self) -> None: ...

    def ready(self) -> bool:
        """True when the next chunk is already in memory, so taking it will not wait.

        The gateway then writes the chunks that arrived together in one go (one system call
        instead of one per chunk) without ever holding a chunk back to wait for another."""
        ...


@runtime_checkable
class ChatProvider(Protocol):
    name: str

    async def complete(self, body: dict[str, Any]) -> ChatCompletion: ...

    async def stream(self, body: dict[str, Any]) -> ChatStream:
        """Opens the upstream stream; raises ProviderError before the first chunk if it fails."""
        ...

    async def close(self) -> None: ...
