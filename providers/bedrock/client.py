"""The Bedrock chat provider: `Converse` and `ConverseStream`, signed per request.

    POST <endpoint>/model/<model id, percent-encoded>/converse
    POST <endpoint>/model/<model id, percent-encoded>/converse-stream

What does not change per request (the endpoint, the two URLs of each model, whether its
requests carry cache points) is built once. A call is one translation, one msgspec encode,
the signature (SigV4 with the chain's credentials, or a Bedrock API key as a bearer token,
static), one pooled POST and one typed decode.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import msgspec
from yarl import URL

from providers.anthropic.inputs import ANTHROPIC_INPUTS
from providers.base import ChatCompletion, EmbeddingResult, InputRules
from providers.bedrock.credentials import SigV4Signer
from providers.bedrock.embeddings import bedrock_embed
from providers.bedrock.errors import error_for_bedrock_response
from providers.bedrock.options import Options
from providers.bedrock.request import converse_request, extension_fields_of
from providers.bedrock.stream import BedrockChatStream
from providers.bedrock.translate import completion_from_bytes
from providers.openai.inputs import OPENAI_UNKNOWN_MODEL
from providers.secrets import SecretSink
from providers.upstream import Upstream, key_header

__all__ = ["BedrockProvider", "create"]

_encode = msgspec.json.encode
_JSON = {"Content-Type": "application/json"}
_STREAM = {"Content-Type": "application/json", "Accept": "application/vnd.amazon.eventstream"}


def create(name: str, options: Options) -> BedrockProvider:
    """Build the provider (inside the running loop); ValueError when `api_key_env` is unset.
    The AWS credential chain is resolved on the first call."""
    key = key_header(options, "Authorization", "Bearer ")
    secrets = SecretSink()
    signer = None if key else SigV4Signer(options.region, options.profile, secrets=secrets)
    upstream = Upstream(
        options, key, errors=error_for_bedrock_response, sign=signer, secrets=secrets
    )
    return BedrockProvider(name, options, upstream)


class BedrockProvider:
    """Implements `providers.base.ChatProvider` and `EmbeddingsProvider` against one
    region's Bedrock runtime."""

    def __init__(self, name: str, options: Options, upstream: Upstream) -> None:
        self.name = name
        self._upstream = upstream
        self._endpoint = options.endpoint()
        self._cache_points = frozenset(options.cache_points)
        self._storage_prefixes = options.allowed_storage_prefixes
        self._urls: dict[str, tuple[URL, URL, bool]] = {}

    @property
    def secrets(self) -> SecretSink:
        return self._upstream.secrets

    def extension_fields(self, upstream_model: str) -> frozenset[str]:
        """The extension fields translated (`providers.base`): `top_k` for the models that
        have it (`providers.bedrock.request.extension_fields_of`)."""
        return extension_fields_of(upstream_model)

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        model = str(body.get("model", ""))
        converse, _, cache = self._url(model)
        payload = _encode(
            converse_request(body, cache_points=cache, storage_prefixes=self._storage_prefixes)
        )
        raw = await self._upstream.request("POST", converse, payload, headers=_JSON)
        return completion_from_bytes(raw, model)

    async def stream(self, body: dict[str, Any]) -> BedrockChatStream:
        model = str(body.get("model", ""))
        _, converse_stream, cache = self._url(model)
        payload = _encode(
            converse_request(body, cache_points=cache, storage_prefixes=self._storage_prefixes)
        )
        response = await self._upstream.stream(converse_stream, payload, headers=_STREAM)
        return await BedrockChatStream(response, model).start()

    def input_rules(self, upstream_model: str) -> InputRules:
        """Claude's rule for Anthropic's models; for the others (Nova, Llama, Mistral) the
        dearest image rule the gateway knows."""
        if "anthropic." in upstream_model or "claude" in upstream_model:
            return ANTHROPIC_INPUTS
        return OPENAI_UNKNOWN_MODEL

    async def embed(self, body: dict[str, Any]) -> EmbeddingResult:
        """`InvokeModel` in the model family's body (`providers.bedrock.embeddings`)."""
        model = str(body.get("model", ""))
        url = URL(f"{self._endpoint}/model/{quote(model, safe='')}/invoke", encoded=True)
        return await bedrock_embed(self._upstream, url, model, body)

    async def close(self) -> None:
        await self._upstream.close()

    def _url(self, model: str) -> tuple[URL, URL, bool]:
        """(converse, converse-stream, cache points) of a model id or ARN, built once."""
        urls = self._urls.get(model)
        if urls is None:
            base = f"{self._endpoint}/model/{quote(model, safe='')}"
            cache = "*" in self._cache_points or model in self._cache_points
            urls = self._urls[model] = (
                URL(base + "/converse", encoded=True),
                URL(base + "/converse-stream", encoded=True),
                cache,
            )
        return urls
