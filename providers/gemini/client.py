"""The Gemini chat provider: one pooled aiohttp session per upstream, `generateContent`.

What does not change per request (headers, timeouts, the two URLs of each model, the
options' extras) is built once, so a call costs one translation, one msgspec encode, one
pooled POST and one typed decode. The session, the status table and the transport errors are
the shared ones (`providers.http`, `providers.status` through `providers.gemini.errors`).
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

import aiohttp
import msgspec
from yarl import URL

from providers.base import ChatCompletion
from providers.errors import ProviderError
from providers.gemini.errors import error_for_gemini_response
from providers.gemini.options import Options
from providers.gemini.request import gemini_request
from providers.gemini.stream import GeminiChatStream, open_stream
from providers.gemini.translate import completion_from_bytes
from providers.http import (
    MAX_ANSWER_BYTES,
    TRANSPORT_ERRORS,
    new_session,
    read_body,
    stream_timeout,
    transport_error,
)

__all__ = ["GeminiProvider", "create"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> GeminiProvider:
    """Build the provider (inside the running loop); ValueError when the key is misconfigured."""
    api_key = options.resolve_api_key(os.environ)
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["x-goog-api-key"] = api_key
    return GeminiProvider(name, options, new_session(options, headers))


class GeminiProvider:
    """Implements `providers.base.ChatProvider` against `<base_url>/models/<model>:...`."""

    def __init__(self, name: str, options: Options, session: aiohttp.ClientSession) -> None:
        self.name = name
        self._options = options
        self._session = session
        self._stream_timeout = stream_timeout(options)
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
        try:
            async with self._session.post(self._url(model)[0], data=payload) as response:
                raw = await read_body(response, MAX_ANSWER_BYTES)
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc
        if not 200 <= response.status < 300:
            raise error_for_gemini_response(response.status, raw, response.headers)
        return completion_from_bytes(raw, model)

    async def stream(self, body: dict[str, Any]) -> GeminiChatStream:
        model = str(body.get("model", ""))
        payload = _encode(gemini_request(body, **self._extras))
        try:
            response = await self._session.post(
                self._url(model)[1], data=payload, timeout=self._stream_timeout
            )
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc
        if not 200 <= response.status < 300 or response.content_type == "application/json":
            await _raise_not_a_stream(response)
        return await open_stream(response, model)

    async def close(self) -> None:
        await self._session.close()

    def _url(self, model: str) -> tuple[URL, URL]:
        """(generateContent, streamGenerateContent?alt=sse) of a model, built once each.

        A bare name goes under `models/`; a name with a collection (`models/x`,
        `tunedModels/y`) is used as it is."""
        urls = self._urls.get(model)
        if urls is None:
            path = model if "/" in model else f"models/{model}"
            urls = self._urls[model] = (
                self._options.url(f"/{path}:generateContent"),
                self._options.url(f"/{path}:streamGenerateContent").with_query(alt="sse"),
            )
        return urls


async def _raise_not_a_stream(response: aiohttp.ClientResponse) -> NoReturn:
    """Raise for an answer that is an error status, or JSON instead of an event stream."""
    try:
        raw = await read_body(response, MAX_ANSWER_BYTES)
    except TRANSPORT_ERRORS as exc:
        raise transport_error(exc) from exc
    finally:
        response.release()
    if not 200 <= response.status < 300:
        raise error_for_gemini_response(response.status, raw, response.headers)
    raise ProviderError("the upstream answered with JSON instead of an event stream")
