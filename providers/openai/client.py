"""The OpenAI-compatible provider: chat, and the Images API (`providers.openai.images`), on one
pooled aiohttp session per upstream.

Everything that does not change per request (URL, headers, timeouts, encoder) is built once in
`create()`, so a call costs one msgspec encode, one pooled POST and one decode. The session,
the status table and the transport errors are the shared ones (`providers.http`,
`providers.status`).
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

import aiohttp
import msgspec

from providers.base import ChatCompletion, ImageRequest, ImageResult, TaskControl
from providers.errors import ProviderError
from providers.http import (
    MAX_ANSWER_BYTES,
    TRANSPORT_ERRORS,
    new_session,
    read_body,
    stream_timeout,
    transport_error,
)
from providers.openai.errors import error_event
from providers.openai.images import OpenAIImages
from providers.openai.options import Options
from providers.openai.stream import OpenAIChatStream, open_stream
from providers.openai.translate import completion_from_bytes
from providers.status import error_for_response

__all__ = ["OpenAIProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> OpenAIProvider:
    """Build the provider (inside the running loop); ValueError when the key is misconfigured."""
    api_key = options.resolve_api_key(os.environ)
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return OpenAIProvider(name, options, new_session(options, headers))


class OpenAIProvider:
    """`ChatProvider` against `<base_url>/chat/completions`, `ImageProvider` against
    `<base_url>/images/generations` and `/images/edits`."""

    def __init__(self, name: str, options: Options, session: aiohttp.ClientSession) -> None:
        self.name = name
        self._session = session
        self._url = options.url("/chat/completions")
        self._stream_timeout = stream_timeout(options)
        self._images = OpenAIImages(options, session)

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        try:
            async with self._session.post(self._url, data=_encode(body)) as response:
                raw = await read_body(response, MAX_ANSWER_BYTES)
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc
        if not 200 <= response.status < 300:
            raise error_for_response(response.status, raw, response.headers)
        return completion_from_bytes(raw)

    async def stream(self, body: dict[str, Any]) -> OpenAIChatStream:
        try:
            response = await self._session.post(
                self._url, data=_encode(body), timeout=self._stream_timeout
            )
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc
        if not 200 <= response.status < 300 or response.content_type == "application/json":
            await _raise_not_a_stream(response)
        return await open_stream(response)

    async def generate_images(self, request: ImageRequest, control: TaskControl) -> ImageResult:
        return await self._images.generate(request, control)

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
        decoded = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        decoded = None
    if isinstance(decoded, dict) and "error" in decoded:
        raise error_event(decoded)
    raise ProviderError("the upstream answered with JSON instead of an event stream")
