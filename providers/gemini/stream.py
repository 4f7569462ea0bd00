"""One streamed call: `streamGenerateContent?alt=sse` bytes -> chunk dicts, as they arrive.

The first chunk is read before `start()` returns, so anything that fails before it (bad
status, refused connection, an error event, a blocked prompt, a stream that ends at once)
raises from `provider.stream()` and the gateway can still fall back or answer with an error.
Gemini ends a stream by closing the body: the end counts as proper only after a finishReason,
and then the usage chunk (`choices: []`) is the last thing yielded.
"""

from __future__ import annotations

from typing import Any

from providers.base import Usage
from providers.errors import ProviderError
from providers.gemini.translate import StreamTranslator
from providers.http import TRANSPORT_ERRORS, transport_error
from providers.http1 import Response
from providers.response_stream import ResponseStream
from providers.sse import SSEDecoder

__all__ = ["GeminiChatStream"]


class GeminiChatStream(ResponseStream):
    """Implements `providers.base.ChatStream`; always `aclose()` it (safe twice).

    Reading to the end hands the connection back to the pool; `aclose()` before the end, or
    any error, closes the connection so the upstream sees the disconnect and stops.
    """

    __slots__ = ("_decoder", "_eof", "_pending", "_ready", "_translator")

    def __init__(self, response: Response, model: str) -> None:
        super().__init__(response)
        self._decoder = SSEDecoder()
        self._translator = StreamTranslator(model)
        self._pending: list[bytes] = []  # event data not yet translated, in reverse order
        self._ready: list[dict[str, Any]] = []  # chunks of one event not yet taken, reversed
        self._eof = False

    def ready(self) -> bool:
        return self._head is not None or bool(self._ready) or bool(self._pending)

    @property
    def usage(self) -> Usage | None:
        """The final counts, or those of a stream cut short (`StreamTranslator.usage_so_far`)."""
        return self._translator.usage_so_far()

    def _clean_end(self, response: Response) -> bool:
        return self._eof

    async def _next_chunk(self) -> dict[str, Any]:
        """The next chunk; StopAsyncIteration at a proper end; ProviderError otherwise."""
        ready = self._ready
        pending = self._pending
        translator = self._translator
        while True:
            if ready:
                return ready.pop()
            if pending:
                chunks = translator.chunks(pending.pop())
                if chunks:
                    chunks.reverse()
                    ready.extend(chunks)
                continue
            response = self._response
            if response is None:  # aclose() from elsewhere while we were reading
                raise StopAsyncIteration
            if self._eof:
                self._ended = True
                if not translator.finished:
                    if not translator.started:
                        raise ProviderError("the upstream stream ended without a single chunk")
                    raise ProviderError("the upstream ended the stream before it finished")
                tail = translator.end()
                if tail is None:
                    raise StopAsyncIteration
                return tail
            try:
                data = await response.read_chunk()
            except TRANSPORT_ERRORS as exc:
                raise transport_error(exc) from exc
            if data:
                events = self._decoder.feed(data)
            else:
                events = self._decoder.flush()
                self._eof = True
            events.reverse()
            pending.extend(events)
