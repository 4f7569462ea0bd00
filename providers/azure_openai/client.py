"""The Azure OpenAI provider: OpenAI's wire format at Azure's URLs, with its key or Entra ID.

The URL of each deployment is built once; a call is then what an OpenAI-compatible call
costs (`providers.openai_compatible`: the request's changes, an answer without usage
counted), plus, with Entra ID, one comparison to know the token is still good.
"""

from __future__ import annotations

from typing import Any

import msgspec
from yarl import URL

from providers.azure_openai.auth import EntraSigner, entra_signer
from providers.azure_openai.errors import error_for_azure_response
from providers.azure_openai.options import Options
from providers.base import ChatCompletion
from providers.openai.errors import not_a_stream
from providers.openai.stream import OpenAIChatStream
from providers.openai.translate import completion_from_bytes
from providers.openai_compatible.request import RequestShape
from providers.openai_compatible.stream import CountedStream
from providers.openai_compatible.usage import estimated_usage, usage_body
from providers.upstream import Upstream, key_header

__all__ = ["AzureOpenAIProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> AzureOpenAIProvider:
    """Build the provider (inside the running loop); ValueError when a credential is
    misconfigured (an unset variable)."""
    headers = {"Content-Type": "application/json"}
    signer: EntraSigner | None = None
    if options.entra is not None:
        signer = entra_signer(options, options.entra)
    else:
        headers |= key_header(options, "api-key")
    upstream = Upstream(
        options, headers, errors=error_for_azure_response, not_a_stream=not_a_stream, sign=signer
    )
    return AzureOpenAIProvider(name, options, upstream, signer)


class AzureOpenAIProvider:
    """`ChatProvider` against a deployment's (or the v1 API's) chat completions."""

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
        self._urls: dict[str, URL] = {}

    def extension_fields(self, upstream_model: str) -> None:
        """Extension fields go to the server as the client sent them (`providers.base`)."""
        return None

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        url, payload = self._request(body)
        raw = await self._upstream.request("POST", url, _encode(payload))
        completion = completion_from_bytes(raw)
        if completion.body.get("usage") is None:
            usage = estimated_usage(body, completion.body)
            completion.body["usage"] = usage_body(usage)
            completion.usage = usage
        return completion

    async def stream(self, body: dict[str, Any]) -> CountedStream:
        url, payload = self._request(body)
        response = await self._upstream.stream(url, _encode(payload))
        return CountedStream(await OpenAIChatStream(response).start(), body)

    async def close(self) -> None:
        await self._upstream.close()
        if self._signer is not None:
            await self._signer.close()

    def _request(self, body: dict[str, Any]) -> tuple[URL, dict[str, Any]]:
        options = self._options
        deployment = options.deployment or str(body.get("model", ""))
        payload = self._shape.apply(body)
        if options.api == "v1":
            if payload.get("model") != deployment:
                payload = {**payload, "model": deployment}
            return self._v1, payload
        url = self._urls.get(deployment)
        if url is None:
            path = f"/openai/deployments/{deployment}/chat/completions"
            url = options.url(path).with_query({"api-version": options.api_version or ""})
            self._urls[deployment] = url
        return url, payload
