"""One streamed call: Anthropic SSE events from an open upstream response -> chunk dicts.

Each read is translated whole into a queue of chunks, so `ready()` is exact (a read that held
only `ping` or `content_block_stop` queues nothing). A failure met while translating (an error
event, a malformed one) is kept and raised after the chunks queued before it. The first chunk
is read before `start()` returns, so whatever fails before it raises from `stream()`.
"""

from __future__ import annotations

from typing import Self

from providers.anthropic.translate import StreamTranslator
from providers.base import Usage
from providers.errors import ProviderError
from providers.http import TRANSPORT_ERRORS, transport_error
from providers.http1 import Response
from providers.response_stream import QueuedStream
from providers.sse import SSEDecoder

__all__ = ["AnthropicChatStream"]


class AnthropicChatStream(QueuedStream):
    """Implements `providers.base.ChatStream`; always `aclose()` it (safe twice).

    The stream ends at `message_stop`, or at EOF after a stop_reason; EOF before one raises.
    Ending normally hands the connection back to the pool; `aclose()` before the end, or any
    error, closes the connection so the upstream sees the disconnect and stops.
    """

    __slots__ = ("_decoder", "_translator")

    def __init__(self, response: Response) -> None:
        super().__init__(response)
        self._decoder = SSEDecoder()
        self._translator = StreamTranslator()

    async def start(self) -> Self:
        """The stream with its first chunk queued; raises (closing the response) if none
        comes: the failure met before it, or a stream that ended at once."""
        try:
            await self._fill()
        except BaseException:
            self._abort()
            raise
        if not self._queue:
            self._fail_start("the upstream stream ended without a single chunk")
        return self

    @property
    def usage(self) -> Usage | None:
        """The final counts, or those of a stream cut short (`StreamTranslator.usage_so_far`)."""
        return self._translator.usage_so_far()

    def _clean_end(self, response: Response) -> bool:
        return self._translator.finished and response.at_eof()

    async def _fill(self) -> None:
        """Read until a chunk is queued, a failure is kept, or the stream ended."""
        chunks = self._queue
        translator = self._translator
        decoder = self._decoder
        while not chunks and self._failure is None:
            response = self._response
            if translator.stopped or response is None:  # message_stop, or aclose() meanwhile
                self._ended = True
                return
            try:
                data = await response.read_chunk()
            except TRANSPORT_ERRORS as exc:
                raise transport_error(exc) from exc
            events = decoder.feed(data) if data else decoder.flush()
            if not data and not events:
                self._ended = True
                if not translator.finished:
                    raise ProviderError("the upstream ended the stream before it finished")
                translator.end(chunks)  # cut after the stop_reason: the usage chunk still
                return
            for event in events:
                if translator.stopped:
                    break
                try:
                    translator.feed(event, chunks)
                except ProviderError as exc:
                    self._failure = exc
                    self._ended = True
                    break
