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

from yarl import URL

from providers.base import EmbeddingResult
from providers.gemini.client import GenerateContentProvider
from providers.gemini.embeddings import embed_one_by_one
from providers.gemini.errors import error_for_gemini_response
from providers.secrets import SecretSink
from providers.upstream import Upstream
from providers.vertex.credentials import GoogleSigner, google_signer
from providers.vertex.options import Options

__all__ = ["VertexProvider", "create"]


def create(name: str, options: Options) -> VertexProvider:
    """Build the provider (inside the running loop); ValueError when the credentials file is
    missing or wrong. The first token is fetched on the first call."""
    secrets = SecretSink()
    signer = google_signer(
        options,
        credentials_file=options.credentials_file,
        token_url=options.token_url,
        metadata_url=options.metadata_url,
        secrets=secrets,
    )
    upstream = Upstream(
        options,
        {"Content-Type": "application/json"},
        errors=error_for_gemini_response,
        sign=signer,
        secrets=secrets,
    )
    return VertexProvider(name, options, upstream, signer)


class VertexProvider(GenerateContentProvider):
    """Implements `providers.base.ChatProvider` and `EmbeddingsProvider` against one project
    and location."""

    def __init__(
        self, name: str, options: Options, upstream: Upstream, signer: GoogleSigner
    ) -> None:
        super().__init__(
            name,
            upstream,
            include_thoughts=options.include_thoughts,
            safety_settings=options.safety_settings,
            storage_prefixes=options.allowed_storage_prefixes,
        )
        self._signer = signer
        self._prefix = (
            f"{options.api_root()}/projects/{options.project}/locations/{options.location}/"
        )

    async def embed(self, body: dict[str, Any]) -> EmbeddingResult:
        """`embedContent`, one call per input (`providers.gemini.embeddings`)."""
        model = str(body.get("model", ""))
        base = self._prefix + (model if "/" in model else f"publishers/google/models/{model}")
        return await embed_one_by_one(self._upstream, URL(base + ":embedContent"), body)

    async def close(self) -> None:
        await super().close()
        await self._signer.close()

    def _model_urls(self, model: str) -> tuple[URL, URL]:
        base = self._prefix + (model if "/" in model else f"publishers/google/models/{model}")
        return (
            URL(base + ":generateContent"),
            URL(base + ":streamGenerateContent").with_query(alt="sse"),
        )
