"""The Azure OpenAI provider: OpenAI's wire format at Azure's URLs, with its key or Entra ID.

The URL of each deployment is built once; a call is then what an OpenAI-compatible call
costs (`providers.openai_compatible`: the request's changes, the stream's unreadable
choices left out), plus, with Entra ID, one comparison to know the token is still good.
"""

from __future__ import annotations

from typing import Any

import msgspec
from yarl import URL

from providers.azure_openai.auth import EntraSigner, entra_signer
from providers.azure_openai.errors import error_for_azure_response
from providers.azure_openai.options import Options
from providers.base import ChatCompletion, EmbeddingResult, InputRules
from providers.openai.embeddings import MAX_EMBEDDINGS_BYTES, embeddings_from_bytes
from providers.openai.errors import not_a_stream
from providers.openai.inputs import OPENAI_UNKNOWN_MODEL
from providers.openai.responses import ResponseEventStream, native_response
from providers.openai.stream import OpenAIChatStream
from providers.openai.translate import completion_from_bytes
from providers.openai_compatible.request import RequestShape
from providers.openai_compatible.stream import FilteredStream
from providers.secrets import SecretSink
from providers.upstream import Upstream, key_header

__all__ = ["AzureOpenAIProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> AzureOpenAIProvider:
    """Build the provider (inside the running loop); ValueError when a credential is
    misconfigured (an unset variable)."""
    headers = {"Content-Type": "application/json"}
    secrets = SecretSink()
    signer: EntraSigner | None = None
    if options.entra is not None:
        signer = entra_signer(options, options.entra, secrets=secrets)
    else:
        headers |= key_header(options, "api-key")
    upstream = Upstream(
        options,
        headers,
        errors=error_for_azure_response,
        not_a_stream=not_a_stream,
        sign=signer,
        secrets=secrets,
    )
    return AzureOpenAIProvider(name, options, upstream, signer)


class AzureOpenAIProvider:
    """`ChatProvider` against a deployment's (or the v1 API's) chat completions,
    `EmbeddingsProvider` against its embeddings (the body as is); `ResponsesProvider` against
    the Responses API (`/openai/v1/responses`, or `/openai/responses?api-version=` for a dated
    API version), `model` the deployment."""

    def __init__(
        self, name: str, options: Options, upstream: Upstream, signer: EntraSigner | None
    ) -> None:
        self.name = name
        self._options = options
        self._upstream = upstream
        self._signer = signer
        self._shape = RequestShape(
            max_tokens_field=options.max_tokens_field, stream_options=options.stream_options
        )
        self._v1 = options.url("/openai/v1/chat/completions")
        self.responses_api = True
        if options.api == "v1":
            self._responses_url = options.url("/openai/v1/responses")
        else:
            query = {"api-version": options.api_version or ""}
            self._responses_url = options.url("/openai/responses").with_query(query)
        self._urls: dict[str, URL] = {}

    @property
    def secrets(self) -> SecretSink:
        return self._upstream.secrets

    def extension_fields(self, upstream_model: str) -> None:
        """Extension fields go to the server as the client sent them (`providers.base`)."""
        return None

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        url, payload = self._request(body)
        raw = await self._upstream.request("POST", url, _encode(payload))
        return completion_from_bytes(raw)

    async def stream(self, body: dict[str, Any]) -> FilteredStream:
        url, payload = self._request(body)
        response = await self._upstream.stream(url, _encode(payload))
        return FilteredStream(await OpenAIChatStream(response).start())

    async def responses(self, body: dict[str, Any]) -> ChatCompletion:
        body.pop("stream", None)
        payload = self._responses_body(body)
        return native_response(
            await self._upstream.request("POST", self._responses_url, _encode(payload))
        )

    async def responses_stream(self, body: dict[str, Any]) -> ResponseEventStream:
        payload = self._responses_body(body)
        payload["stream"] = True
        response = await self._upstream.stream(self._responses_url, _encode(payload))
        return await ResponseEventStream(response).start()

    def _responses_body(self, body: dict[str, Any]) -> dict[str, Any]:
        deployment = self._options.deployment
        if deployment and body.get("model") != deployment:
            body["model"] = deployment
        return body

    def input_rules(self, upstream_model: str) -> InputRules:
        """A deployment's name does not say its model: the dearest of OpenAI's rules."""
        return OPENAI_UNKNOWN_MODEL

    async def embed(self, body: dict[str, Any]) -> EmbeddingResult:
        """The deployment's `/embeddings` (or the v1 API's), the body as is."""
        url, payload = self._route(body, "embeddings", body)
        raw = await self._upstream.request(
            "POST", url, _encode(payload), max_bytes=MAX_EMBEDDINGS_BYTES
        )
        return embeddings_from_bytes(raw)

    async def close(self) -> None:
        await self._upstream.close()
        if self._signer is not None:
            await self._signer.close()

    def _request(self, body: dict[str, Any]) -> tuple[URL, dict[str, Any]]:
        return self._route(body, "chat/completions", self._shape.apply(body))

    def _route(
        self, body: dict[str, Any], operation: str, payload: dict[str, Any]
    ) -> tuple[URL, dict[str, Any]]:
        """The URL of `operation` for the body's deployment, and the payload to send there."""
        options = self._options
        deployment = options.deployment or str(body.get("model", ""))
        if options.api == "v1":
            if payload.get("model") != deployment:
                payload = {**payload, "model": deployment}
            if operation == "chat/completions":
                return self._v1, payload
            return options.url(f"/openai/v1/{operation}"), payload
        url = self._urls.get(f"{deployment}/{operation}")
        if url is None:
            path = f"/openai/deployments/{deployment}/{operation}"
            url = options.url(path).with_query({"api-version": options.api_version or ""})
            self._urls[f"{deployment}/{operation}"] = url
        return url, payload
