"""Gemini on Vertex AI: the Gemini adapter's translation at Vertex's URLs, with OAuth.

    POST <root>/projects/<project>/locations/<location>/publishers/google/models/<model>
         :generateContent                  (a whole answer)
         :streamGenerateContent?alt=sse    (a stream)

The request, the answer, the stream and the error bodies are the Gemini API's
(`providers.gemini`: request, translate, stream, errors), reused as they are: Vertex speaks
the same `GenerateContentRequest` and answers in the same shape (with `trafficType`,
`createTime` and per-modality counts besides). A model name that holds a path
(`endpoints/123`, `publishers/x/models/y`) goes under the location as it is. What Vertex adds
is the token: `providers.vertex.credentials`, one comparison per call while it is fresh.
"""

from __future__ import annotations

from typing import Any

import msgspec
from yarl import URL

from providers.base import ChatCompletion
from providers.gemini.errors import error_for_gemini_response
from providers.gemini.request import gemini_request
from providers.gemini.stream import GeminiChatStream
from providers.gemini.translate import completion_from_bytes
from providers.upstream import Upstream
from providers.vertex.credentials import GoogleSigner, google_signer
from providers.vertex.options import Options

__all__ = ["VertexProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> VertexProvider:
    """Build the provider (inside the running loop); ValueError when the credentials file is
    missing or wrong. The first token is fetched on the first call."""
    signer = google_signer(
        options,
        credentials_file=options.credentials_file,
        token_url=options.token_url,
        metadata_url=options.metadata_url,
    )
    upstream = Upstream(
        options, {"Content-Type": "application/json"}, errors=error_for_gemini_response, sign=signer
    )
    return VertexProvider(name, options, upstream, signer)


class VertexProvider:
    """Implements `providers.base.ChatProvider` against one project and location."""

    def __init__(
        self, name: str, options: Options, upstream: Upstream, signer: GoogleSigner
    ) -> None:
        self.name = name
        self._upstream = upstream
        self._signer = signer
        self._prefix = (
            f"{options.api_root()}/projects/{options.project}/locations/{options.location}/"
        )
        self._urls: dict[str, tuple[URL, URL]] = {}
        self._extras: dict[str, Any] = {
            "include_thoughts": options.include_thoughts,
            "safety_settings": [
                {"category": category, "threshold": threshold}
                for category, threshold in options.safety_settings.items()
            ],
        }

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

    async def close(self) -> None:
        await self._upstream.close()
        await self._signer.close()

    def _url(self, model: str) -> tuple[URL, URL]:
        """(generateContent, streamGenerateContent?alt=sse) of a model, built once each."""
        urls = self._urls.get(model)
        if urls is None:
            path = model if "/" in model else f"publishers/google/models/{model}"
            base = self._prefix + path
            urls = self._urls[model] = (
                URL(base + ":generateContent"),
                URL(base + ":streamGenerateContent").with_query(alt="sse"),
            )
        return urls
