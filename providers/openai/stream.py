"""One streamed call: SSE bytes from an open aiohttp response -> chunk dicts, as they arrive.

The first chunk is read before `open_stream` returns, so anything that fails before it (bad
status, refused connection, an error event, a stream that ends at once) raises from
`provider.stream()` and the gateway can still fall back or answer with a proper error.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from providers.base import Usage
from providers.errors import ProviderError
from providers.http import TRANSPORT_ERRORS, transport_error
from providers.openai.translate import StreamTranslator
from providers.sse import SSEDecoder

__all__ = ["OpenAIChatStream", "open_stream"]


async def open_stream(response: aiohttp.ClientResponse) -> OpenAIChatStream:
    """Wrap a 2xx event-stream response; raises (and closes it) if no first chunk comes."""
    stream = OpenAIChatStream(response)
    try:
        stream._head = await stream._next_chunk()
    except StopAsyncIteration:
        response.close()
        raise ProviderError("the upstream stream ended without a single chunk") from None
    except BaseException:
        response.close()
        raise
    return stream


class OpenAIChatStream:
    """Implements `providers.base.ChatStream`; always `aclose()` it (safe twice).

    Ending normally (`[DONE]`, EOF) hands the connection back to the pool; `aclose()` before
    the end, or any error, closes the connection so the upstream sees the disconnect and stops.
    """

    __slots__ = ("_decoder", "_ended", "_head", "_pending", "_response", "_translator", "usage")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.usage: Usage | None = None
        self._response: aiohttp.ClientResponse | None = response
        self._decoder = SSEDecoder()
        self._translator = StreamTranslator()
        self._pending: list[bytes] = []  # event data not yet translated, in reverse order
        self._head: dict[str, Any] | None = None
        self._ended = False

    def __aiter__(self) -> OpenAIChatStream:
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

    def ready(self) -> bool:
        return self._head is not None or bool(self._pending) or self._decoder.done

    async def aclose(self) -> None:
        response = self._response
        if response is None:
            return
        self._response = None
        self._ended = True
        if self._decoder.done and response.content.is_eof():
            response.release()
        else:
            response.close()

    async def _next_chunk(self) -> dict[str, Any]:
        """The next chunk; StopAsyncIteration at a proper end; ProviderError otherwise."""
        pending = self._pending
        translator = self._translator
        while True:
            while pending:
                chunk = translator.chunk(pending.pop())
                if translator.usage is not None:
                    self.usage = translator.usage
                if chunk is not None:
                    return chunk
            if self._decoder.done:
                self._ended = True
                raise StopAsyncIteration
            response = self._response
            if response is None:  # aclose() from elsewhere while we were reading
                raise StopAsyncIteration
            try:
                data = await response.content.readany()
            except TRANSPORT_ERRORS as exc:
                raise transport_error(exc) from exc
            if data:
                events = self._decoder.feed(data)
            else:
                events = self._decoder.flush()
                if not events and not self._decoder.done:
                    self._ended = True
                    if translator.finished:
                        raise StopAsyncIteration
                    raise ProviderError("the upstream ended the stream before it finished")
            events.reverse()
            pending.extend(events)

    def _abort(self) -> None:
        self._ended = True
        response = self._response
        if response is not None:
            self._response = None
            response.close()
