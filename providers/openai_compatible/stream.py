"""A stream from an OpenAI-compatible server, passed on as the OpenAI adapter reads it
(`providers.openai.stream`), without the choices a client cannot read: a choice without a
`delta` (Azure's asynchronous content filter annotates what was sent with its offsets, after
the finish) is left out, and a chunk left with nothing is skipped, since OpenAI clients read
every choice's delta. Its usage is what the server reported, if anything: the gateway counts
what was delivered when it did not (`gateway.chat.usage`).
"""

from __future__ import annotations

from typing import Any, Self

from providers.base import Usage
from providers.openai.stream import OpenAIChatStream

__all__ = ["FilteredStream"]


class FilteredStream:
    """Implements `providers.base.ChatStream` over an OpenAI-format stream; always
    `aclose()` it (safe twice)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: OpenAIChatStream) -> None:
        self._inner = inner

    @property
    def usage(self) -> Usage | None:
        return self._inner.usage

    def ready(self) -> bool:
        return self._inner.ready()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while True:
            chunk = await self._inner.__anext__()
            choices = chunk.get("choices")
            if choices and not all(type(c) is dict and "delta" in c for c in choices):
                choices = chunk["choices"] = [
                    c for c in choices if type(c) is dict and "delta" in c
                ]
                if not choices and not chunk.get("usage"):
                    continue
            return chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
