"""The Messages API as is (`providers.base.MessagesProvider`): a client's `/v1/messages` request
sent unchanged, its answer given back unchanged.

Nothing is translated, so nothing is lost: thinking blocks and their signatures, redacted
thinking, `cache_control` wherever the client put it, tool use and results, images and
documents, `system` as a string or blocks, stop sequences, metadata, and fields this code does
not know. What is read, and only read: the counts (`message_start`'s, then `message_delta`'s,
which are cumulative), the output delivered so far (text, thinking and tool-input characters,
a quarter of them in tokens: what a stream cut short is charged beyond the last count), and
error objects, which raise as in the translating adapter (`providers.anthropic.errors`).

A stream's first event is handed out only once something follows `message_start` and `ping`:
an error event right after `message_start`, as Anthropic sends when overloaded, still fails
`messages_stream()`, so the gateway can fall back.
"""

from __future__ import annotations

from typing import Any, Self

import msgspec

from providers.anthropic.errors import error_event
from providers.anthropic.wire import ErrorObject
from providers.base import ChatCompletion, Usage
from providers.errors import ProviderError
from providers.http import TRANSPORT_ERRORS, transport_error
from providers.http1 import Response
from providers.response_stream import QueuedStream
from providers.sse import SSEDecoder

__all__ = ["NativeEventStream", "native_message", "usage_of"]

_decode = msgspec.json.decode
_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
_OPENING = frozenset({"message_start", "ping"})


def usage_of(counts: dict[str, int], more_output: int = 0, *, partial: bool = False) -> Usage:
    """The gateway's counts of Anthropic's usage: the prompt is input + cache reads + cache
    writes (each priced apart by the gateway)."""
    cache_read = counts.get("cache_read_input_tokens", 0)
    cache_write = counts.get("cache_creation_input_tokens", 0)
    prompt = counts.get("input_tokens", 0) + cache_read + cache_write
    completion = counts.get("output_tokens", 0) + more_output
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cached_tokens=cache_read,
        cache_creation_tokens=cache_write,
        partial=partial,
    )


def _take_counts(into: dict[str, int], usage: object) -> None:
    """Keep the integer counts `usage` reported (a later report replaces an earlier one)."""
    if isinstance(usage, dict):
        for name in _COUNTS:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                into[name] = value


def native_message(raw: bytes) -> ChatCompletion:
    """A whole message as the upstream sent it; ProviderError for an error object or a body
    that is not a message."""
    try:
        body = _decode(raw)
    except msgspec.DecodeError as exc:
        raise ProviderError(f"upstream sent malformed JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ProviderError("upstream answer is not a JSON object")
    kind = body.get("type")
    if kind == "error":
        raise error_event(_error_object(body.get("error")))
    if kind != "message":
        raise ProviderError(f"upstream answer is a {kind!r}, not a message")
    counts: dict[str, int] = {}
    _take_counts(counts, body.get("usage"))
    return ChatCompletion(body=body, usage=usage_of(counts), output_chars=_output_chars(body))


def _output_chars(message: dict[str, Any]) -> int:
    """Characters of output in a message's content: text, thinking, tool input (as JSON)."""
    chars = 0
    for block in message.get("content") or ():
        if not isinstance(block, dict):
            continue
        for key in ("text", "thinking"):
            value = block.get(key)
            if isinstance(value, str):
                chars += len(value)
        if "input" in block:
            chars += len(msgspec.json.encode(block["input"]))
    return chars


def _error_object(value: object) -> ErrorObject:
    if not isinstance(value, dict):
        return ErrorObject()
    kind, message = value.get("type"), value.get("message")
    return ErrorObject(
        type=kind if isinstance(kind, str) else "",
        message=message if isinstance(message, str) else "",
    )


def _delivered(event: dict[str, Any]) -> int:
    """Characters of output a `content_block_delta` carries."""
    delta = event.get("delta")
    if not isinstance(delta, dict):
        return 0
    for key in ("text", "thinking", "partial_json"):
        value = delta.get(key)
        if isinstance(value, str):
            return len(value)
    return 0


class NativeEventStream(QueuedStream):
    """Implements `providers.base.ChatStream` over Anthropic's events (dicts, as sent); always
    `aclose()` it (safe twice).

    The stream ends after `message_stop`, or at EOF after a stop_reason; EOF before one
    raises. A failure met while reading (an error event, a malformed one) is kept and raised
    after the events read before it."""

    __slots__ = (
        "_counts",
        "_decoder",
        "_delivered",
        "_finished",
        "_started",
        "_stopped",
    )

    def __init__(self, response: Response) -> None:
        super().__init__(response)
        self._decoder = SSEDecoder()
        self._counts: dict[str, int] = {}
        self._delivered = 0
        self._started = False
        self._finished = False  # a stop_reason arrived
        self._stopped = False  # message_stop arrived

    async def start(self) -> Self:
        """The stream with its opening events queued, up to the first one after
        `message_start` and `ping`; raises (closing the response) if it fails before that."""
        try:
            while self._failure is None and not self._ended:
                await self._fill()
                if any(event.get("type") not in _OPENING for event in self._queue):
                    break
        except BaseException:
            self._abort()
            raise
        if self._failure is not None or not self._queue:
            self._fail_start("the upstream stream ended without a single event")
        return self

    @property
    def usage(self) -> Usage | None:
        """The final counts once `message_delta` reported them; before, those of
        `message_start` plus the output delivered since (`partial`); None before any."""
        if self._finished:
            return usage_of(self._counts)
        if not self._started:
            return None
        return usage_of(self._counts, (self._delivered + 3) // 4, partial=True)

    def _clean_end(self, response: Response) -> bool:
        return self._finished and response.at_eof()

    async def _fill(self) -> None:
        """Read until an event is queued, a failure is kept, or the stream ended."""
        events = self._queue
        before = len(events)
        while len(events) == before and self._failure is None:
            response = self._response
            if self._stopped or response is None:  # message_stop, or aclose() meanwhile
                self._ended = True
                return
            try:
                data = await response.read_chunk()
            except TRANSPORT_ERRORS as exc:
                raise transport_error(exc) from exc
            raw_events = self._decoder.feed(data) if data else self._decoder.flush()
            if not data and not raw_events:
                self._ended = True
                if not self._finished:
                    raise ProviderError("the upstream ended the stream before it finished")
                return
            for raw in raw_events:
                if self._stopped:
                    break
                try:
                    self._take(raw)
                except ProviderError as exc:
                    self._failure = exc
                    self._ended = True
                    break

    def _take(self, raw: bytes) -> None:
        try:
            event = _decode(raw)
        except msgspec.DecodeError as exc:
            raise ProviderError(f"upstream sent a malformed stream event: {exc}") from exc
        if not isinstance(event, dict):
            raise ProviderError("upstream sent a stream event that is not an object")
        kind = event.get("type")
        if kind == "content_block_delta":
            self._delivered += _delivered(event)
        elif kind == "message_start":
            message = event.get("message")
            if isinstance(message, dict):
                self._started = True
                _take_counts(self._counts, message.get("usage"))
        elif kind == "message_delta":
            _take_counts(self._counts, event.get("usage"))
            delta = event.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") is not None:
                self._finished = True
        elif kind == "message_stop":
            self._finished = self._stopped = True
        elif kind == "error":
            raise error_event(_error_object(event.get("error")))
        self._queue.append(event)
