"""What every adapter's `ChatStream` shares: one upstream response, read to its end.

`start()` takes the first chunk before the stream is handed out (`_head`), so a failure up to
there raises from `stream()` itself. Ending cleanly hands the connection back to the pool;
`aclose()` before that, or any error, closes it, so the upstream sees the disconnect and stops
generating. Subclasses say how the next chunk is made (`_next_chunk`) and when the response was
read to a proper end (`_clean_end`).

`QueuedStream` is the form for upstreams whose reads are translated whole into a queue (so
`ready()` is exact) and whose failure met mid-read is kept and raised after the items queued
before it (Anthropic's events, as chunks or as they are).
"""

from __future__ import annotations

from collections import deque
from typing import Any, NoReturn, Self

from providers.base import Usage
from providers.errors import ProviderError
from providers.http1 import Response

__all__ = ["QueuedStream", "ResponseStream"]


class ResponseStream:
    """Implements `providers.base.ChatStream` but for `ready()`; always `aclose()` it (safe
    twice)."""

    __slots__ = ("_ended", "_head", "_response", "_usage")

    def __init__(self, response: Response) -> None:
        self._usage: Usage | None = None
        self._response: Response | None = response
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

    def _clean_end(self, response: Response) -> bool:
        """True when the response was read to a proper end (its connection can be reused)."""
        return False

    def _abort(self) -> None:
        self._ended = True
        response = self._response
        if response is not None:
            self._response = None
            response.close()


class QueuedStream(ResponseStream):
    """A `ResponseStream` read through a queue: `_fill` reads until an item is queued, a
    failure is kept (`_failure`) or the stream ended; items come out first, then the failure."""

    __slots__ = ("_failure", "_queue")

    def __init__(self, response: Response) -> None:
        super().__init__(response)
        self._queue: deque[dict[str, Any]] = deque()
        self._failure: ProviderError | None = None

    async def __anext__(self) -> dict[str, Any]:
        queue = self._queue
        if not queue and self._failure is None and not self._ended:
            try:
                await self._fill()
            except ProviderError:
                self._abort()
                raise
        if queue:
            return queue.popleft()
        failure = self._failure
        if failure is not None:
            self._failure = None
            self._abort()
            raise failure
        raise StopAsyncIteration

    def ready(self) -> bool:
        return bool(self._queue) or self._failure is not None

    def _fail_start(self, ended: str) -> NoReturn:
        """`start()` got nothing to hand out: close, and raise the failure kept, or `ended`."""
        self._abort()
        failure = self._failure
        if failure is not None:
            raise failure
        raise ProviderError(ended)

    async def _fill(self) -> None:
        raise NotImplementedError
