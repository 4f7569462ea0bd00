"""The Gemini adapter's tests: a provider pointed at a real local fake upstream, and the
bodies and stream readers they share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from providers.base import ChatProvider
from providers.gemini import Options, create
from tests.fakes.gemini_upstream import FakeGemini
from tests.providers.adapter_checks import drain, run

__all__ = ["BODY", "STREAM_BODY", "chunk", "collect", "drain", "run", "upstream"]


@asynccontextmanager
async def upstream(**options: Any) -> AsyncIterator[tuple[FakeGemini, ChatProvider]]:
    """A fake upstream and a provider pointed at it, both closed afterwards."""
    async with FakeGemini() as fake:
        provider = create("gem", Options(base_url=fake.base_url, **options))
        try:
            yield fake, provider
        finally:
            await provider.close()


async def collect(provider: ChatProvider, body: dict[str, Any]) -> list[dict[str, Any]]:
    stream = await provider.stream(body)
    chunks: list[dict[str, Any]] = []
    try:
        await drain(stream, chunks)
    finally:
        await stream.aclose()
    return chunks


BODY: dict[str, Any] = {
    "model": "gemini-2.5-flash",
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "max_completion_tokens": 256,
}


STREAM_BODY: dict[str, Any] = {**BODY, "stream": True, "stream_options": {"include_usage": True}}


def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"choices": choices, **extra}
