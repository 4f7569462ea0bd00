"""What every adapter's `ChatStream` shares: one upstream response, read to its end.

`start()` takes the first chunk before the stream is handed out (`_head`), so a failure up to
there raises from `stream()` itself. Ending cleanly hands the connection back to the pool;
`aclose()` before that, or any error, closes it, so the upstream sees the disconnect and stops
generating. Subclasses say how the next chunk is made (`_next_chunk`) and when the response was
read to a proper end (`_clean_end`).
"""

from __future__ import annotations

from typing import Any, Self

import aiohttp

from providers.base import Usage
from providers.errors import ProviderError

__all__ = ["ResponseStream"]


class ResponseStream:
    """Implements `providers.base.ChatStream` but for `ready()`; always `aclose()` it (safe
    twice)."""

    __slots__ = ("_ended", "_head", "_response", "_usage")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._usage: Usage | None = None
        self._response: aiohttp.ClientResponse | None = response
        self._head: dict[str, Any] | None = None
        self._ended = False

    @property
    def usage(self) -> Usage | None:
        """What the upstream reported (`providers.base.ChatStream.usage`): here the final
        counts once seen; a subclass whose upstream reports as it goes adds the partial ones."""
        return self._usage

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> dict[str, Any]:
        head = self._head
        if head is not None:
            self._head = None
            return head
        if self._ended:
            raise StopAsyncIteration
        try:
            return await self._next_chunk()
        except ProviderError:
            self._abort()
            raise

    async def start(self) -> Self:
        """The stream with its first chunk read; raises (closing the response) if none comes."""
        try:
            self._head = await self._next_chunk()
        except StopAsyncIteration:
            self._abort()
            raise ProviderError("the upstream stream ended without a single chunk") from None
        except BaseException:
            self._abort()
            raise
        return self

    async def aclose(self) -> None:
        response = self._response
        if response is None:
            return
        self._response = None
        self._ended = True
        if self._clean_end(response):
            response.release()
        else:
            response.close()

    async def _next_chunk(self) -> dict[str, Any]:
        """The next chunk; StopAsyncIteration at a proper end; ProviderError otherwise."""
        raise NotImplementedError

    def _clean_end(self, response: aiohttp.ClientResponse) -> bool:
        """True when the response was read to a proper end (its connection can be reused)."""
        return False

    def _abort(self) -> None:
        self._ended = True
        response = self._response
        if response is not None:
            self._response = None
            response.close()
