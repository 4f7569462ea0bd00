"""The OpenAI-compatible chat provider: one pooled aiohttp session per upstream.

Everything that does not change per request (URL, headers, timeouts, encoder) is built once in
`create()`, so a call costs one msgspec encode, one pooled POST and one decode.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

import aiohttp
import msgspec
from yarl import URL

from providers.base import ChatCompletion
from providers.errors import ProviderError
from providers.openai.errors import TRANSPORT_ERRORS, error_event, status_error, transport_error
from providers.openai.options import Options
from providers.openai.stream import OpenAIChatStream, open_stream
from providers.openai.translate import completion_from_bytes

__all__ = ["OpenAIProvider", "create", "new_session"]

_encode = msgspec.json.encode


def create(name: str, options: Options) -> OpenAIProvider:
    """Build the provider (inside the running loop); ValueError when the key is misconfigured."""
    api_key = options.resolve_api_key(os.environ)
    return OpenAIProvider(name, options, new_session(options, api_key))


def new_session(options: Options, api_key: str | None) -> aiohttp.ClientSession:
    """The pooled session: keep-alive connections, default headers, the non-stream timeout."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    headers.update(options.extra_headers)
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=options.max_connections, limit_per_host=0),
        headers=headers,
        timeout=aiohttp.ClientTimeout(
            total=options.timeout_seconds, sock_connect=options.connect_timeout_seconds
        ),
        trust_env=False,
    )


class OpenAIProvider:
    """Implements `providers.base.ChatProvider` against `<base_url>/chat/completions`."""

    def __init__(self, name: str, options: Options, session: aiohttp.ClientSession) -> None:
        self.name = name
        self._session = session
        self._url = URL(options.base_url.rstrip("/") + "/chat/completions")
        self._stream_timeout = aiohttp.ClientTimeout(
            total=None,
            connect=options.timeout_seconds,
            sock_connect=options.connect_timeout_seconds,
            sock_read=options.stream_read_timeout_seconds,
        )

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        try:
            async with self._session.post(self._url, data=_encode(body)) as response:
                raw = await response.read()
                status = response.status
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc
        if not 200 <= status < 300:
            raise status_error(status, raw)
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

    async def close(self) -> None:
        await self._session.close()


async def _raise_not_a_stream(response: aiohttp.ClientResponse) -> NoReturn:
    """Raise for an answer that is an error status, or JSON instead of an event stream."""
    try:
        raw = await response.read()
    except TRANSPORT_ERRORS as exc:
        raise transport_error(exc) from exc
    finally:
        response.release()
    if not 200 <= response.status < 300:
        raise status_error(response.status, raw)
    try:
        decoded = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        decoded = None
    if isinstance(decoded, dict) and "error" in decoded:
        raise error_event(decoded)
    raise ProviderError("the upstream answered with JSON instead of an event stream")
