"""The Gemini chat provider: one connection pool per upstream, `generateContent`.

What does not change per request (headers, timeouts, the two URLs of each model, the
options' extras) is built once, so a call costs one translation, one msgspec encode, one
pooled POST and one typed decode. The session, its calls and the transport errors are the
shared ones (`providers.upstream`); error bodies are read by `providers.gemini.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from yarl import URL

from providers.base import ChatCompletion, EmbeddingResult, InputRules
from providers.gemini.embeddings import batch_embed
from providers.gemini.errors import error_for_gemini_response
from providers.gemini.inputs import GEMINI_INPUTS
from providers.gemini.options import Options
from providers.gemini.request import gemini_request
from providers.gemini.stream import GeminiChatStream
from providers.gemini.translate import completion_from_bytes
from providers.secrets import SecretSink
from providers.upstream import Upstream, key_header

__all__ = ["GeminiProvider", "GenerateContentProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> GeminiProvider:
    """Build the provider (inside the running loop); ValueError when the key is misconfigured."""
    headers = {"Content-Type": "application/json"} | key_header(options, "x-goog-api-key")
    upstream = Upstream(options, headers, errors=error_for_gemini_response)
    return GeminiProvider(name, options, upstream)


_EXTENSIONS = frozenset({"top_k"})


class GenerateContentProvider:
    """`providers.base.ChatProvider` over the Gemini API's `generateContent` calls, whatever
    serves them: a subclass says where a model's two URLs are (`_model_urls`), the base builds
    them once per model and makes the calls. Vertex AI is the other subclass
    (`providers.vertex.client`)."""

    def __init__(
        self,
        name: str,
        upstream: Upstream,
        *,
        include_thoughts: bool,
        safety_settings: Mapping[str, str],
        storage_prefixes: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self._upstream = upstream
        self._urls: dict[str, tuple[URL, URL]] = {}
        self._extras: dict[str, Any] = {
            "include_thoughts": include_thoughts,
            "safety_settings": [
                {"category": category, "threshold": threshold}
                for category, threshold in safety_settings.items()
            ],
            "storage_prefixes": storage_prefixes,
        }

    def extension_fields(self, upstream_model: str) -> frozenset[str]:
        """The extension fields translated (`providers.base`): `top_k` is `topK`."""
        return _EXTENSIONS

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        model = str(body.get("model", ""))
        payload = _encode(gemini_request(body, **self._extras))
        raw = await self._upstream.request("POST", self._url(model)[0], payload)
        return completion_from_bytes(raw, model)

    async def stream(self, body: dict[str, Any]) -> GeminiChatStream:
        model = str(body.get("model", ""))
        payload = _encode(gemini_request(body, **self._extras))
        response = await self._upstream.stream(self._url(model)[1], payload)
        return await GeminiChatStream(response, model).start()

    @property
    def secrets(self) -> SecretSink:
        """The credentials it sends, for the gateway to mask (`providers.secrets`)."""
        return self._upstream.secrets

    def input_rules(self, upstream_model: str) -> InputRules:
        return GEMINI_INPUTS

    async def close(self) -> None:
        await self._upstream.close()

    def _url(self, model: str) -> tuple[URL, URL]:
        """(generateContent, streamGenerateContent?alt=sse) of a model, built once each."""
        urls = self._urls.get(model)
        if urls is None:
            urls = self._urls[model] = self._model_urls(model)
        return urls

    def _model_urls(self, model: str) -> tuple[URL, URL]:
        raise NotImplementedError


class GeminiProvider(GenerateContentProvider):
    """The Gemini API itself: `<base_url>/models/<model>:...`, the key in `x-goog-api-key`;
    also `EmbeddingsProvider`."""

    def __init__(self, name: str, options: Options, upstream: Upstream) -> None:
        super().__init__(
            name,
            upstream,
            include_thoughts=options.include_thoughts,
            safety_settings=options.safety_settings,
            storage_prefixes=options.allowed_storage_prefixes,
        )
        self._options = options

    async def embed(self, body: dict[str, Any]) -> EmbeddingResult:
        """`batchEmbedContents` (`providers.gemini.embeddings`)."""
        model = str(body.get("model", ""))
        path = model if "/" in model else f"models/{model}"
        url = self._options.url(f"/{path}:batchEmbedContents")
        return await batch_embed(self._upstream, url, model, body)

    def _model_urls(self, model: str) -> tuple[URL, URL]:
        """A bare name goes under `models/`; a name with a collection (`models/x`,
        `tunedModels/y`) is used as it is."""
        path = model if "/" in model else f"models/{model}"
        return (
            self._options.url(f"/{path}:generateContent"),
            self._options.url(f"/{path}:streamGenerateContent").with_query(alt="sse"),
        )
