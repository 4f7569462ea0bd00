"""The Anthropic chat provider: one connection pool per upstream, `POST /messages`.

Headers, URL, timeouts and decoders are built once in `create()`; a call costs one request
translation, one msgspec encode, one pooled POST and one decode. The session, its calls, the
status table and the transport errors are the shared ones (`providers.upstream`), so a 529
is `UpstreamUnavailable` and a 400 `UpstreamRejectedRequest` with Anthropic's message.

It also speaks the Messages API as is (`providers.base.MessagesProvider`, `native.py`): the
gateway's `/v1/messages` requests go through untranslated, with the client's
`anthropic-version` and `anthropic-beta` headers; the routing file's `cache_control` marks are
not added to them (the client places its own breakpoints, and Anthropic allows four).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from providers.anthropic.errors import not_a_stream
from providers.anthropic.inputs import ANTHROPIC_INPUTS
from providers.anthropic.native import NativeEventStream, native_message
from providers.anthropic.options import Options
from providers.anthropic.request import cache_mark, messages_request
from providers.anthropic.stream import AnthropicChatStream
from providers.anthropic.translate import completion_from_bytes
from providers.base import ChatCompletion, InputRules
from providers.errors import ProviderError
from providers.secrets import SecretSink
from providers.upstream import Upstream, key_header

__all__ = ["AnthropicProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> AnthropicProvider:
    """Build the provider (inside the running loop); ValueError when the key is misconfigured."""
    headers = {"Content-Type": "application/json", "anthropic-version": options.anthropic_version}
    headers |= key_header(options, "x-api-key")
    return AnthropicProvider(name, options, Upstream(options, headers, not_a_stream=not_a_stream))


_EXTENSIONS = frozenset({"top_k"})


class AnthropicProvider:
    """Implements `providers.base.ChatProvider` and `providers.base.MessagesProvider` against
    `<base_url>/messages`."""

    def __init__(self, name: str, options: Options, upstream: Upstream) -> None:
        self.name = name
        self._options = options
        self._upstream = upstream
        self._url = options.url("/messages")
        self._count_url = options.url("/messages/count_tokens")
        self._default_max_tokens = options.default_max_tokens
        self._marks: dict[str, dict[str, Any] | None] = {}  # model -> its cache_control

    def extension_fields(self, upstream_model: str) -> frozenset[str]:
        """The extension fields translated (`providers.base`): `top_k` is Anthropic's own."""
        return _EXTENSIONS

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        request = self._request(body, stream=False)
        return completion_from_bytes(
            await self._upstream.request("POST", self._url, _encode(request))
        )

    async def stream(self, body: dict[str, Any]) -> AnthropicChatStream:
        request = self._request(body, stream=True)
        response = await self._upstream.stream(self._url, _encode(request))
        return await AnthropicChatStream(response).start()

    async def messages(self, body: dict[str, Any], headers: Mapping[str, str]) -> ChatCompletion:
        body.pop("stream", None)
        raw = await self._upstream.request("POST", self._url, _encode(body), headers=headers)
        return native_message(raw)

    async def messages_stream(
        self, body: dict[str, Any], headers: Mapping[str, str]
    ) -> NativeEventStream:
        body["stream"] = True
        response = await self._upstream.stream(self._url, _encode(body), headers=headers)
        return await NativeEventStream(response).start()

    async def count_tokens(
        self, body: dict[str, Any], headers: Mapping[str, str]
    ) -> dict[str, Any]:
        raw = await self._upstream.request("POST", self._count_url, _encode(body), headers=headers)
        try:
            answer = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise ProviderError(f"upstream sent malformed JSON: {exc}") from exc
        if not isinstance(answer, dict) or not isinstance(answer.get("input_tokens"), int):
            raise ProviderError("upstream answer to count_tokens has no input_tokens")
        return answer

    def _request(self, body: dict[str, Any], *, stream: bool) -> dict[str, Any]:
        model = str(body.get("model", ""))
        try:
            cache = self._marks[model]
        except KeyError:
            cache = self._marks[model] = cache_mark(self._options.cache_ttl(model))
        return messages_request(
            body, default_max_tokens=self._default_max_tokens, stream=stream, cache=cache
        )

    @property
    def secrets(self) -> SecretSink:
        """The credentials it sends, for the gateway to mask (`providers.secrets`)."""
        return self._upstream.secrets

    def input_rules(self, upstream_model: str) -> InputRules:
        return ANTHROPIC_INPUTS

    async def close(self) -> None:
        await self._upstream.close()
