"""The OpenAI chat dialect (`gateway.chat.dialect.ChatDialect`): `data: <json>` Server-Sent
Events, `data: [DONE]` at the end, a broken stream's last event holding the error envelope,
and the completion's JSON as it is."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.errors import GatewayError
from gateway.http.envelope import envelope_bytes

__all__ = ["OPENAI_CHAT", "SSE_CONTENT_TYPE", "OpenAIChat", "OpenAIEventFramer"]

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"

_encode = msgspec.json.Encoder().encode
_DONE = b"data: [DONE]\n\n"


class OpenAIEventFramer:
    """`gateway.chat.framing.StreamFramer` for OpenAI clients. It keeps no state, so one per
    `include_usage` serves every stream."""

    content_type = SSE_CONTENT_TYPE

    def __init__(self, *, include_usage: bool) -> None:
        self.wants_usage = include_usage

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        return b"data: " + _encode(chunk) + b"\n\n"

    def error(self, error: GatewayError, request_id: str) -> bytes:
        return b"data: " + envelope_bytes(error, request_id) + b"\n\n"

    def end(self, usage: dict[str, Any] | None) -> bytes:
        return _DONE if usage is None else self.chunk(usage) + _DONE


_FRAMERS = {flag: OpenAIEventFramer(include_usage=flag) for flag in (False, True)}


class OpenAIChat:
    """The dialect of `POST /v1/chat/completions`."""

    name = "openai"
    path = "/v1/chat/completions"
    limit_field = None  # max_tokens or max_completion_tokens, as the client sent it
    lowers_max_tokens = False  # a limit above the model's is a 400, as OpenAI answers it

    def framer(self, *, include_usage: bool) -> OpenAIEventFramer:
        return _FRAMERS[include_usage]

    def completion(self, body: dict[str, Any]) -> bytes:
        return _encode(body)


OPENAI_CHAT = OpenAIChat()
