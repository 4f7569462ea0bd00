"""What the chat adapters' tests share, whatever the wire format: running a test coroutine,
reading a stream, and the check that a refused connection is `UpstreamUnavailable`."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from providers.base import ChatProvider, ChatStream
from providers.errors import UpstreamUnavailable
from providers.http1 import ConnectFailed

__all__ = ["assert_refused_is_unavailable", "drain", "refused_url", "run"]


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


async def drain(stream: ChatStream, into: list[dict[str, Any]]) -> None:
    async for chunk in stream:
        into.append(chunk)


def refused_url(path: str = "/v1") -> str:
    """A base URL on a port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


async def assert_refused_is_unavailable(
    make: Callable[[str], ChatProvider], body: dict[str, Any], path: str = "/v1"
) -> None:
    """Both calls of the provider `make(base_url)` makes, pointed at a port nothing listens on,
    fail retryably, from the connector's error; the provider is closed after."""
    provider = make(refused_url(path))
    try:
        for call in (provider.complete, provider.stream):
            with pytest.raises(UpstreamUnavailable) as caught:
                await call(body)
            assert isinstance(caught.value.__cause__, ConnectFailed)
    finally:
        await provider.close()
