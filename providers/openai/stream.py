"""One streamed call: SSE bytes from an open upstream response -> chunk dicts, as they arrive.

The first chunk is read before `start()` returns, so anything that fails before it (bad
status, refused connection, an error event, a stream that ends at once) raises from
`provider.stream()` and the gateway can still fall back or answer with a proper error.
"""

from __future__ import annotations

from typing import Any

from providers.errors import ProviderError
from providers.http import TRANSPORT_ERRORS, transport_error
from providers.http1 import Response
from providers.openai.translate import StreamTranslator
from providers.response_stream import ResponseStream
from providers.sse import SSEDecoder

__all__ = ["OpenAIChatStream"]


class OpenAIChatStream(ResponseStream):
    """Implements `providers.base.ChatStream`; always `aclose()` it (safe twice).

    Ending normally (`[DONE]`, EOF) hands the connection back to the pool; `aclose()` before
    the end, or any error, closes the connection so the upstream sees the disconnect and stops.
    """

    __slots__ = ("_decoder", "_pending", "_translator")

    def __init__(self, response: Response) -> None:
        super().__init__(response)
        self._decoder = SSEDecoder()
        self._translator = StreamTranslator()
        self._pending: list[bytes] = []  # event data not yet translated, in reverse order

    def ready(self) -> bool:
        return self._head is not None or bool(self._pending) or self._decoder.done

    def next_ready(self) -> dict[str, Any] | None:
        """The next chunk when it is in memory already (no read, no await), else None: the
        gateway takes the chunks that arrived together in one loop (`providers.base.ChatStream`)."""
        head = self._head
        if head is not None:
            self._head = None
            return head
        try:
            return self._pending_chunk()
        except ProviderError:
            self._abort()
            raise

    def _pending_chunk(self) -> dict[str, Any] | None:
        """The next chunk among the events already read, or None when they are used up."""
        pending = self._pending
        translator = self._translator
        while pending:
            chunk = translator.chunk(pending.pop())
            if translator.usage is not None:
                self._usage = translator.usage
            if chunk is not None:
                return chunk
        return None

    def _clean_end(self, response: Response) -> bool:
        return self._decoder.done and response.at_eof()

    async def _next_chunk(self) -> dict[str, Any]:
        """The next chunk; StopAsyncIteration at a proper end; ProviderError otherwise."""
        pending = self._pending
        while True:
            chunk = self._pending_chunk()
            if chunk is not None:
                return chunk
            if self._decoder.done:
                self._ended = True
                raise StopAsyncIteration
            response = self._response
            if response is None:  # aclose() from elsewhere while we were reading
                raise StopAsyncIteration
            try:
                data = await response.read_chunk()
            except TRANSPORT_ERRORS as exc:
                raise transport_error(exc) from exc
            if data:
                events = self._decoder.feed(data)
            else:
                events = self._decoder.flush()
                if not events and not self._decoder.done:
                    self._ended = True
                    if self._translator.finished:
                        raise StopAsyncIteration
                    raise ProviderError("the upstream ended the stream before it finished")
            events.reverse()
            pending.extend(events)
