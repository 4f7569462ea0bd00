"""OpenAI's Responses API as is (`providers.base.ResponsesProvider`): a client's `/v1/responses`
request sent unchanged (but for `model`), its answer given back unchanged.

Nothing is translated, so nothing is lost: encrypted reasoning, built-in tools and their
calls, `include`, `store` and `previous_response_id` on the upstream, fields this code does not
know. What is read, and only read: the counts (the `usage` of the response, in a stream that of
its terminal event: `response.completed`, `response.incomplete` or `response.failed`), the
output delivered so far (text, reasoning and argument delta characters, a quarter of them in
tokens: what a stream cut short is charged), and `error` events, which raise.
"""

from __future__ import annotations

from typing import Any, Self

import msgspec

from providers.base import ChatCompletion, Usage
from providers.errors import ProviderError
from providers.http import TRANSPORT_ERRORS, transport_error
from providers.http1 import Response
from providers.response_stream import QueuedStream
from providers.sse import SSEDecoder
from providers.status import message_from_error

__all__ = ["TERMINAL_EVENTS", "ResponseEventStream", "native_response", "usage_of"]

_decode = msgspec.json.decode
TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(usage: object, more_output: int = 0, *, partial: bool = False) -> Usage:
    """The gateway's counts of a Responses API usage object (input includes cached tokens)."""
    counts = usage if isinstance(usage, dict) else {}
    details = counts.get("input_tokens_details")
    details = details if isinstance(details, dict) else {}
    prompt = _count(counts.get("input_tokens"))
    completion = _count(counts.get("output_tokens")) + more_output
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cached_tokens=_count(details.get("cached_tokens")),
        cache_creation_tokens=_count(details.get("cache_write_tokens")),
        partial=partial,
    )


def native_response(raw: bytes) -> ChatCompletion:
    """A whole response as the upstream sent it; ProviderError for an error object or a body
    that is not a response."""
    try:
        body = _decode(raw)
    except msgspec.DecodeError as exc:
        raise ProviderError(f"upstream sent malformed JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ProviderError("upstream answer is not a JSON object")
    if body.get("object") != "response":
        message = message_from_error(body.get("error"))
        raise ProviderError(f"upstream answer is not a response: {message or 'no message'}")
    return ChatCompletion(body=body, usage=usage_of(body.get("usage")))


def _delivered(event: dict[str, Any]) -> int:
    """Characters of output a delta event carries."""
    delta = event.get("delta")
    return len(delta) if isinstance(delta, str) else 0


class ResponseEventStream(QueuedStream):
    """Implements `providers.base.ChatStream` over the Responses API's events (dicts, as sent);
    always `aclose()` it (safe twice).

    The stream ends after its terminal event; EOF before one raises. An `error` event (or a
    malformed one) is kept and raised after the events read before it."""

    __slots__ = ("_decoder", "_delivered", "_finished", "_started", "_usage_body")

    def __init__(self, response: Response) -> None:
        super().__init__(response)
        self._decoder = SSEDecoder()
        self._delivered = 0
        self._started = False
        self._finished = False
        self._usage_body: object = None

    async def start(self) -> Self:
        """The stream with its first event queued; raises (closing the response) if it fails
        before one."""
        try:
            while self._failure is None and not self._ended and not self._queue:
                await self._fill()
        except BaseException:
            self._abort()
            raise
        if not self._queue:
            self._fail_start("the upstream stream ended without a single event")
        return self

    @property
    def usage(self) -> Usage | None:
        """The terminal event's counts; before, the output delivered so far (`partial`)."""
        if self._finished:
            return usage_of(self._usage_body)
        if not self._started:
            return None
        return usage_of(None, (self._delivered + 3) // 4, partial=True)

    def _clean_end(self, response: Response) -> bool:
        return self._finished and response.at_eof()

    async def _fill(self) -> None:
        events = self._queue
        before = len(events)
        while len(events) == before and self._failure is None:
            response = self._response
            if self._finished or response is None:
                self._ended = True
                return
            try:
                data = await response.read_chunk()
            except TRANSPORT_ERRORS as exc:
                raise transport_error(exc) from exc
            raw_events = self._decoder.feed(data) if data else self._decoder.flush()
            if not data and not raw_events:
                self._ended = True
                raise ProviderError("the upstream ended the stream before it finished")
            for raw in raw_events:
                if self._finished:
                    break
                try:
                    self._take(raw)
                except ProviderError as exc:
                    self._failure = exc
                    self._ended = True
                    break

    def _take(self, raw: bytes) -> None:
        if raw == b"[DONE]":
            return
        try:
            event = _decode(raw)
        except msgspec.DecodeError as exc:
            raise ProviderError(f"upstream sent a malformed stream event: {exc}") from exc
        if not isinstance(event, dict):
            raise ProviderError("upstream sent a stream event that is not an object")
        kind = event.get("type")
        self._started = True
        if kind in TERMINAL_EVENTS:
            response = event.get("response")
            if isinstance(response, dict):
                self._usage_body = response.get("usage")
            self._finished = True
        elif kind == "error":
            message = event.get("message") or message_from_error(event.get("error"))
            raise ProviderError(f"upstream reported an error mid-stream: {message or 'none'}")
        elif isinstance(kind, str) and kind.endswith(".delta"):
            self._delivered += _delivered(event)
        self._queue.append(event)
