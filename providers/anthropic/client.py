"""The Anthropic chat provider: one pooled aiohttp session per upstream, `POST /messages`.

Headers, URL, timeouts and decoders are built once in `create()`; a call costs one request
translation, one msgspec encode, one pooled POST and one decode. The session, its calls, the
status table and the transport errors are the shared ones (`providers.upstream`), so a 529
is `UpstreamUnavailable` and a 400 `UpstreamRejectedRequest` with Anthropic's message.
"""

from __future__ import annotations

from typing import Any

import msgspec

from providers.anthropic.errors import not_a_stream
from providers.anthropic.options import Options
from providers.anthropic.request import cache_mark, messages_request
from providers.anthropic.stream import AnthropicChatStream
from providers.anthropic.translate import completion_from_bytes
from providers.base import ChatCompletion
from providers.upstream import Upstream, key_header

__all__ = ["AnthropicProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> AnthropicProvider:
    """Build the provider (inside the running loop); ValueError when the key is misconfigured."""
    headers = {"Content-Type": "application/json", "anthropic-version": options.anthropic_version}
    headers |= key_header(options, "x-api-key")
    return AnthropicProvider(name, options, Upstream(options, headers, not_a_stream=not_a_stream))


class AnthropicProvider:
    """Implements `providers.base.ChatProvider` against `<base_url>/messages`."""

    def __init__(self, name: str, options: Options, upstream: Upstream) -> None:
        self.name = name
        self._options = options
        self._upstream = upstream
        self._url = options.url("/messages")
        self._default_max_tokens = options.default_max_tokens
        self._marks: dict[str, dict[str, Any] | None] = {}  # model -> its cache_control

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        request = self._request(body, stream=False)
        return completion_from_bytes(
            await self._upstream.request("POST", self._url, _encode(request))
        )

    async def stream(self, body: dict[str, Any]) -> AnthropicChatStream:
        request = self._request(body, stream=True)
        response = await self._upstream.stream(self._url, _encode(request))
        return await AnthropicChatStream(response).start()

    def _request(self, body: dict[str, Any], *, stream: bool) -> dict[str, Any]:
        model = str(body.get("model", ""))
        try:
            cache = self._marks[model]
        except KeyError:
            cache = self._marks[model] = cache_mark(self._options.cache_ttl(model))
        return messages_request(
            body, default_max_tokens=self._default_max_tokens, stream=stream, cache=cache
        )

    async def close(self) -> None:
        await self._upstream.close()
