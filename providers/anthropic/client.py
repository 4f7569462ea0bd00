"""The Anthropic chat provider: one pooled aiohttp session per upstream, `POST /messages`.

Headers, URL, timeouts and decoders are built once in `create()`; a call costs one request
translation, one msgspec encode, one pooled POST and one decode. The session, the status table
and the transport errors are the shared ones (`providers.http`, `providers.status`), so a 529
is `UpstreamUnavailable` and a 400 `UpstreamRejectedRequest` with Anthropic's message.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

import aiohttp
import msgspec

from providers.anthropic.errors import error_event
from providers.anthropic.options import Options
from providers.anthropic.request import messages_request
from providers.anthropic.stream import AnthropicChatStream, open_stream
from providers.anthropic.translate import completion_from_bytes
from providers.anthropic.wire import Message
from providers.base import ChatCompletion
from providers.errors import ProviderError
from providers.http import (
    MAX_ANSWER_BYTES,
    TRANSPORT_ERRORS,
    new_session,
    read_body,
    stream_timeout,
    transport_error,
)
from providers.status import error_for_response

__all__ = ["AnthropicProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> AnthropicProvider:
    """Build the provider (inside the running loop); ValueError when the key is misconfigured."""
    api_key = options.resolve_api_key(os.environ)
    headers = {"Content-Type": "application/json", "anthropic-version": options.anthropic_version}
    if api_key:
        headers["x-api-key"] = api_key
    return AnthropicProvider(name, options, new_session(options, headers))


class AnthropicProvider:
    """Implements `providers.base.ChatProvider` against `<base_url>/messages`."""

    def __init__(self, name: str, options: Options, session: aiohttp.ClientSession) -> None:
        self.name = name
        self._session = session
        self._url = options.url("/messages")
        self._stream_timeout = stream_timeout(options)
        self._default_max_tokens = options.default_max_tokens

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        request = messages_request(body, default_max_tokens=self._default_max_tokens, stream=False)
        try:
            async with self._session.post(self._url, data=_encode(request)) as response:
                raw = await read_body(response, MAX_ANSWER_BYTES)
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc
        if not 200 <= response.status < 300:
            raise error_for_response(response.status, raw, response.headers)
        return completion_from_bytes(raw)

    async def stream(self, body: dict[str, Any]) -> AnthropicChatStream:
        request = messages_request(body, default_max_tokens=self._default_max_tokens, stream=True)
        try:
            response = await self._session.post(
                self._url, data=_encode(request), timeout=self._stream_timeout
            )
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc
        if not 200 <= response.status < 300 or response.content_type == "application/json":
            await _raise_not_a_stream(response)
        return await open_stream(response)

    async def close(self) -> None:
        await self._session.close()


async def _raise_not_a_stream(response: aiohttp.ClientResponse) -> NoReturn:
    """Raise for an answer that is an error status, or JSON instead of an event stream."""
    try:
        raw = await read_body(response, MAX_ANSWER_BYTES)
    except TRANSPORT_ERRORS as exc:
        raise transport_error(exc) from exc
    finally:
        response.release()
    if not 200 <= response.status < 300:
        raise error_for_response(response.status, raw, response.headers)
    try:
        message = msgspec.json.decode(raw, type=Message)
    except (msgspec.DecodeError, msgspec.ValidationError):
        message = None
    if message is not None and message.type == "error":
        raise error_event(message.error)
    raise ProviderError("the upstream answered with JSON instead of an event stream")
