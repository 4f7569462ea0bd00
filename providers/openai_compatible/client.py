"""The OpenAI-compatible provider: the OpenAI adapter's wire format on one pooled session,
with the server's differences applied to each request.

Everything that does not change per request (URL, headers, the request's changes) is built
once in `create()`; a call that needs no change costs what an OpenAI call costs.
"""

from __future__ import annotations

from typing import Any

import msgspec

from providers.base import ChatCompletion, EmbeddingResult, InputRules
from providers.openai.embeddings import MAX_EMBEDDINGS_BYTES, embeddings_from_bytes
from providers.openai.errors import not_a_stream
from providers.openai.inputs import OPENAI_UNKNOWN_MODEL
from providers.openai.stream import OpenAIChatStream
from providers.openai.translate import completion_from_bytes
from providers.openai_compatible.options import Options
from providers.openai_compatible.request import RequestShape
from providers.openai_compatible.stream import FilteredStream
from providers.secrets import SecretSink
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
    """`ChatProvider` against `<base_url>/chat/completions` of a compatible server,
    `EmbeddingsProvider` against its `<base_url>/embeddings` (the body as is)."""

    def __init__(self, name: str, options: Options, upstream: Upstream) -> None:
        self.name = name
        self._upstream = upstream
        self._url = options.url("/chat/completions")
        self._embeddings = options.url("/embeddings")
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
        return completion_from_bytes(raw)

    async def stream(self, body: dict[str, Any]) -> FilteredStream:
        payload = _encode(self._shape.apply(body))
        response = await self._upstream.stream(self._url, payload)
        inner = await OpenAIChatStream(response).start()
        return FilteredStream(inner)

    @property
    def secrets(self) -> SecretSink:
        """The credentials it sends, for the gateway to mask (`providers.secrets`)."""
        return self._upstream.secrets

    def input_rules(self, upstream_model: str) -> InputRules:
        """Any server's model: the dearest of OpenAI's rules."""
        return OPENAI_UNKNOWN_MODEL

    async def embed(self, body: dict[str, Any]) -> EmbeddingResult:
        raw = await self._upstream.request(
            "POST", self._embeddings, _encode(body), max_bytes=MAX_EMBEDDINGS_BYTES
        )
        return embeddings_from_bytes(raw)

    async def close(self) -> None:
        await self._upstream.close()
