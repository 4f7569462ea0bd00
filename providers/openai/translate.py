"""Upstream wire format -> the gateway's OpenAI shapes. For OpenAI itself that is a pass-through
that validates just enough (an object, with usage read when present) and never drops a field:
tool_calls, logprobs, reasoning_content, refusal, audio and anything newer go out untouched.

Other adapters copy this module's two entry points and put their real translation here.
"""

from __future__ import annotations

from typing import Any

import msgspec

from providers.base import ChatCompletion, Usage
from providers.errors import ProviderError
from providers.openai.errors import error_event

__all__ = ["StreamTranslator", "completion_from_bytes"]

_decode = msgspec.json.decode
_NO_USAGE = Usage()


def completion_from_bytes(raw: bytes) -> ChatCompletion:
    """A `chat.completion` body; ProviderError when it is not a JSON object with choices."""
    try:
        body = _decode(raw)
    except msgspec.DecodeError as exc:
        raise ProviderError(f"upstream sent malformed JSON: {exc}") from exc
    if type(body) is not dict or "choices" not in body:
        if type(body) is dict and "error" in body:
            raise error_event(body)
        raise ProviderError("upstream answer is not a chat.completion object")
    return ChatCompletion(body=body, usage=_usage(body.get("usage")) or _NO_USAGE)


class StreamTranslator:
    """Per-stream state: turns each SSE data payload into a chunk and collects usage.

    `finished` records that a finish_reason arrived, so a stream cut after it (without
    `[DONE]`) still counts as complete while one cut before it is an error.
    """

    __slots__ = ("finished", "usage")

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.finished = False

    def chunk(self, data: bytes) -> dict[str, Any] | None:
        """The chunk to emit for one event, or None to emit nothing for it."""
        try:
            chunk = _decode(data)
        except msgspec.DecodeError as exc:
            raise ProviderError(f"upstream sent a malformed stream chunk: {exc}") from exc
        if type(chunk) is not dict:
            raise ProviderError("upstream stream chunk is not a JSON object")
        choices = chunk.get("choices")
        if choices:
            if not self.finished:
                for choice in choices:
                    if type(choice) is dict and choice.get("finish_reason"):
                        self.finished = True
        elif "error" in chunk:
            raise error_event(chunk)
        usage = chunk.get("usage")
        if usage:
            self.usage = _usage(usage)
        return chunk


def _usage(value: object) -> Usage | None:
    """The counts of a `usage` object, each read on its own: one that is not a non-negative
    integer counts as absent (0), so a malformed object leaves the gateway to count what it
    delivered (`gateway.chat.usage`); None when `usage` is not an object."""
    if type(value) is not dict:
        return None
    details = value.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if type(details) is dict else 0
    written = _count(details.get("cache_creation_tokens")) if type(details) is dict else 0
    prompt, output = _count(value.get("prompt_tokens")), _count(value.get("completion_tokens"))
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=output,
        total_tokens=_count(value.get("total_tokens")) or prompt + output,
        cached_tokens=cached,
        cache_creation_tokens=written,
    )


def _count(value: object) -> int:
    return value if type(value) is int and value > 0 else 0
