"""A stream from a server that may not count: OpenAI's stream, plus a usage chunk of our own
when the server sent none.

The chunks pass through as the OpenAI adapter reads them (`providers.openai.stream`); their
output is counted on the way (`providers.openai_compatible.usage`). A choice without a
`delta` (Azure's asynchronous content filter annotates what was sent with its offsets, after
the finish) is left out, and a chunk left with nothing is skipped: OpenAI clients read every
choice's delta. When the stream ends
properly without a usage chunk, one more chunk (`choices: []`) carries the estimated usage,
as a server that counts would have sent it; a stream that breaks off reports what was
delivered so far as `partial` usage, so the gateway charges it like any other.
"""

from __future__ import annotations

from typing import Any, Self

from providers.base import Usage
from providers.openai.stream import OpenAIChatStream
from providers.openai_compatible.usage import OutputCounter, prompt_tokens, usage_body

__all__ = ["CountedStream"]


class CountedStream:
    """Implements `providers.base.ChatStream` over an OpenAI-format stream; always
    `aclose()` it (safe twice)."""

    __slots__ = ("_base", "_body", "_counter", "_ended", "_estimate", "_inner")

    def __init__(self, inner: OpenAIChatStream, body: dict[str, Any]) -> None:
        self._inner = inner
        self._body = body  # the request, counted only if the server does not count
        self._counter = OutputCounter()
        self._base: dict[str, Any] | None = None
        self._estimate: Usage | None = None
        self._ended = False

    @property
    def usage(self) -> Usage | None:
        """The server's counts when it sent them; else the estimate, `partial` until the
        stream ended properly."""
        reported = self._inner.usage
        if reported is not None:
            return reported
        if self._estimate is not None:
            return self._estimate
        prompt, output = prompt_tokens(self._body), self._counter.tokens()
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=output,
            total_tokens=prompt + output,
            partial=True,
        )

    def ready(self) -> bool:
        return self._inner.ready()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._ended:
            raise StopAsyncIteration
        while True:
            try:
                chunk = await self._inner.__anext__()
            except StopAsyncIteration:
                self._ended = True
                if self._inner.usage is not None:
                    raise
                return self._usage_chunk()
            choices = chunk.get("choices")
            if choices and not all(type(c) is dict and "delta" in c for c in choices):
                # An annotation without a delta (Azure's asynchronous content filter sends
                # its offsets after the finish): not a chunk a client can read.
                choices = chunk["choices"] = [
                    c for c in choices if type(c) is dict and "delta" in c
                ]
                if not choices and not chunk.get("usage"):
                    continue
            if self._base is None:
                self._base = chunk
            counter = self._counter
            for choice in choices or ():
                counter.add_delta(choice.get("delta"))
            return chunk

    async def aclose(self) -> None:
        self._ended = True
        await self._inner.aclose()

    def _usage_chunk(self) -> dict[str, Any]:
        prompt, output = prompt_tokens(self._body), self._counter.tokens()
        usage = self._estimate = Usage(
            prompt_tokens=prompt, completion_tokens=output, total_tokens=prompt + output
        )
        base = self._base or {}
        return {
            "id": base.get("id", ""),
            "object": "chat.completion.chunk",
            "created": base.get("created", 0),
            "model": base.get("model", ""),
            "choices": [],
            "usage": usage_body(usage),
        }
