"""One streamed call: `ConverseStream`'s binary event stream -> chunk dicts, as bytes arrive.

Bytes go through `providers.bedrock.eventstream` (messages completed so far, CRCs checked),
each event message through `providers.bedrock.translate.StreamTranslator`; an exception
message raises its mapped error (`providers.bedrock.errors`). The first chunk is read before
`start()` returns, so a failure up to there (a status, an exception event right after
`messageStart`, a stream that ends at once) raises from `provider.stream()`. Bedrock ends a
stream by closing the body: a proper end comes after `messageStop` (then usually
`metadata`); an end before it, or inside a message, raises ProviderError.
"""

from __future__ import annotations

from typing import Any

from providers.base import Usage
from providers.bedrock.errors import exception_event
from providers.bedrock.eventstream import EventStreamDecoder, Message
from providers.bedrock.translate import StreamTranslator
from providers.errors import ProviderError
from providers.http import TRANSPORT_ERRORS, transport_error
from providers.http1 import Response
from providers.response_stream import ResponseStream

__all__ = ["BedrockChatStream"]


class BedrockChatStream(ResponseStream):
    """Implements `providers.base.ChatStream`; always `aclose()` it (safe twice).

    Reading to the end hands the connection back to the pool; `aclose()` before the end, or
    any error, closes it, so Bedrock sees the disconnect and stops generating.
    """

    __slots__ = ("_decoder", "_eof", "_pending", "_ready", "_translator")

    def __init__(self, response: Response, model: str) -> None:
        super().__init__(response)
        self._decoder = EventStreamDecoder()
        self._translator = StreamTranslator(model)
        self._pending: list[Message] = []  # messages not yet translated, in reverse order
        self._ready: list[dict[str, Any]] = []  # chunks of one event not yet taken, reversed
        self._eof = False

    def ready(self) -> bool:
        return self._head is not None or bool(self._ready) or bool(self._pending)

    @property
    def usage(self) -> Usage | None:
        """The counts of the `metadata` event (Bedrock reports none before it)."""
        return self._translator.usage

    def _clean_end(self, response: Response) -> bool:
        return self._eof and not self._decoder.pending

    async def _next_chunk(self) -> dict[str, Any]:
        """The next chunk; StopAsyncIteration at a proper end; ProviderError otherwise."""
        ready = self._ready
        pending = self._pending
        translator = self._translator
        while True:
            if ready:
                return ready.pop()
            if pending:
                message = pending.pop()
                headers = message.headers
                kind = headers.get(":message-type", "event")
                if kind != "event":
                    raise exception_event(headers, message.payload)
                chunks = translator.chunks(str(headers.get(":event-type", "")), message.payload)
                if chunks:
                    chunks.reverse()
                    ready.extend(chunks)
                continue
            if self._eof:
                self._ended = True
                if self._decoder.pending:
                    raise ProviderError("the upstream ended the stream inside a message")
                if not translator.finished:
                    raise ProviderError("the upstream ended the stream before it finished")
                raise StopAsyncIteration
            response = self._response
            if response is None:  # aclose() from elsewhere while we were reading
                raise StopAsyncIteration
            try:
                data = await response.read_chunk()
            except TRANSPORT_ERRORS as exc:
                raise transport_error(exc) from exc
            if data:
                messages = self._decoder.feed(data)
                messages.reverse()
                pending.extend(messages)
            else:
                self._eof = True
