"""OpenAI's chat stream framing: `data: <json>` Server-Sent Events, `data: [DONE]` at the end,
and a broken stream's last event holding the error envelope."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.errors import GatewayError
from gateway.http.envelope import envelope_bytes

__all__ = ["OPENAI_SSE", "SSE_CONTENT_TYPE", "OpenAIEventFramer"]

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"

_encode = msgspec.json.Encoder().encode
_DONE = b"data: [DONE]\n\n"


class OpenAIEventFramer:
    """`gateway.chat.framing.StreamFramer` for OpenAI clients (stateless: one serves all)."""

    content_type = SSE_CONTENT_TYPE

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        return b"data: " + _encode(chunk) + b"\n\n"

    def error(self, error: GatewayError, request_id: str) -> bytes:
        return b"data: " + envelope_bytes(error, request_id) + b"\n\n"

    def end(self) -> bytes:
        return _DONE


OPENAI_SSE = OpenAIEventFramer()
