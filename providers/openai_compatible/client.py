"""The OpenAI-compatible provider: the OpenAI adapter's wire format on one pooled session,
with the server's differences applied to each request and its missing usage counted.

Everything that does not change per request (URL, headers, the request's changes) is built
once in `create()`; a call that needs no change costs what an OpenAI call costs, plus a
character count per stream chunk.
"""

from __future__ import annotations

from typing import Any

import msgspec

from providers.base import ChatCompletion
from providers.openai.errors import not_a_stream
from providers.openai.stream import OpenAIChatStream
from providers.openai.translate import completion_from_bytes
from providers.openai_compatible.options import Options
from providers.openai_compatible.request import RequestShape
from providers.openai_compatible.stream import CountedStream
from providers.openai_compatible.usage import estimated_usage, usage_body
from providers.upstream import Upstream, key_header

__all__ = ["OpenAICompatibleProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> OpenAICompatibleProvider:
    """Build the provider (inside the running loop); ValueError when the key is misconfigured."""
    headers = {"Content-Type": "application/json"}
    headers |= key_header(options, "Authorization", "Bearer ")
    upstream = Upstream(options, headers, not_a_stream=not_a_stream)
    return OpenAICompatibleProvider(name, options, upstream)


class OpenAICompatibleProvider:
    """`ChatProvider` against `<base_url>/chat/completions` of a compatible server."""

    def __init__(self, name: str, options: Options, upstream: Upstream) -> None:
        self.name = name
        self._upstream = upstream
        self._url = options.url("/chat/completions")
        self._shape = RequestShape(
            max_tokens_field=options.max_tokens_field,
            stream_options=options.stream_options,
            drop_fields=options.drop_fields,
        )

    def extension_fields(self, upstream_model: str) -> None:
        """Extension fields go to the server as the client sent them (`providers.base`)."""
        return None

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        raw = await self._upstream.request("POST", self._url, _encode(self._shape.apply(body)))
        completion = completion_from_bytes(raw)
        if completion.body.get("usage") is None:  # the server did not count: count here
            usage = estimated_usage(body, completion.body)
            completion.body["usage"] = usage_body(usage)
            completion.usage = usage
        return completion

    async def stream(self, body: dict[str, Any]) -> CountedStream:
        payload = _encode(self._shape.apply(body))
        response = await self._upstream.stream(self._url, payload)
        inner = await OpenAIChatStream(response).start()
        return CountedStream(inner, body)

    async def close(self) -> None:
        await self._upstream.close()
