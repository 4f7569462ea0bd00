"""The OpenAI-compatible provider: chat, and the Images API (`providers.openai.images`), on one
connection pool per upstream.

Everything that does not change per request (URL, headers, timeouts, encoder) is built once in
`create()`, so a call costs one msgspec encode, one pooled POST and one decode. The session,
its calls, the status table and the transport errors are the shared ones
(`providers.upstream`); a 2xx JSON answer to a stream request is read for its error object.
"""

from __future__ import annotations

from typing import Any

import msgspec

from providers.base import (
    ChatCompletion,
    EmbeddingResult,
    ImageRequest,
    ImageResult,
    InputRules,
    TaskControl,
)
from providers.openai.embeddings import MAX_EMBEDDINGS_BYTES, embeddings_from_bytes
from providers.openai.errors import not_a_stream
from providers.openai.images import OpenAIImages
from providers.openai.inputs import openai_input_rules
from providers.openai.options import Options
from providers.openai.responses import ResponseEventStream, native_response
from providers.openai.stream import OpenAIChatStream
from providers.openai.translate import completion_from_bytes
from providers.secrets import SecretSink
from providers.upstream import Upstream, key_header

__all__ = ["OpenAIProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> OpenAIProvider:
    """Build the provider (inside the running loop); ValueError when the key is misconfigured."""
    headers = {"Content-Type": "application/json"}
    headers |= key_header(options, "Authorization", "Bearer ")
    return OpenAIProvider(name, options, Upstream(options, headers, not_a_stream=not_a_stream))


class OpenAIProvider:
    """`ChatProvider` against `<base_url>/chat/completions`, `EmbeddingsProvider` against
    `<base_url>/embeddings`, `ImageProvider` against `<base_url>/images/generations` and
    `/images/edits`, `ResponsesProvider` against `<base_url>/responses`
    (`providers.openai.responses`)."""

    def __init__(self, name: str, options: Options, upstream: Upstream) -> None:
        self.name = name
        self._upstream = upstream
        self._url = options.url("/chat/completions")
        self._responses_url = options.url("/responses")
        self.responses_api = options.responses_api
        self._images = OpenAIImages(options, upstream)
        self._embeddings = options.url("/embeddings")

    def extension_fields(self, upstream_model: str) -> None:
        """Extension fields go to the server as the client sent them (`providers.base`)."""
        return None

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        return completion_from_bytes(await self._upstream.request("POST", self._url, _encode(body)))

    async def stream(self, body: dict[str, Any]) -> OpenAIChatStream:
        response = await self._upstream.stream(self._url, _encode(body))
        return await OpenAIChatStream(response).start()

    async def responses(self, body: dict[str, Any]) -> ChatCompletion:
        body.pop("stream", None)
        return native_response(
            await self._upstream.request("POST", self._responses_url, _encode(body))
        )

    async def responses_stream(self, body: dict[str, Any]) -> ResponseEventStream:
        body["stream"] = True
        response = await self._upstream.stream(self._responses_url, _encode(body))
        return await ResponseEventStream(response).start()

    async def embed(self, body: dict[str, Any]) -> EmbeddingResult:
        raw = await self._upstream.request(
            "POST", self._embeddings, _encode(body), max_bytes=MAX_EMBEDDINGS_BYTES
        )
        return embeddings_from_bytes(raw)

    async def generate_images(self, request: ImageRequest, control: TaskControl) -> ImageResult:
        return await self._images.generate(request, control)

    @property
    def secrets(self) -> SecretSink:
        """The credentials it sends, for the gateway to mask (`providers.secrets`)."""
        return self._upstream.secrets

    def input_rules(self, upstream_model: str) -> InputRules:
        return openai_input_rules(upstream_model)

    async def close(self) -> None:
        await self._upstream.close()
