"""The Bedrock adapter's tests: throwaway AWS credentials in an environment of their own
(no ~/.aws, no metadata endpoint reached), a provider pointed at a real local fake."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from providers.base import ChatProvider
from providers.bedrock import Options, create
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.providers.adapter_checks import drain, run

__all__ = ["BODY", "KEY", "MODEL", "SECRET", "STREAM_BODY", "collect", "drain", "run", "upstream"]

KEY, SECRET = "AKIDGATEWAYTEST01", "gateway-test-secret-0123456789"
MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"

BODY: dict[str, Any] = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "max_completion_tokens": 256,
}
STREAM_BODY: dict[str, Any] = {**BODY, "stream": True, "stream_options": {"include_usage": True}}


@asynccontextmanager
async def upstream(**options: Any) -> AsyncIterator[tuple[FakeBedrock, ChatProvider]]:
    """A fake that checks signatures made with `KEY`/`SECRET`, and a provider pointed at it."""
    async with FakeBedrock(credentials=(KEY, SECRET)) as fake:
        provider = create("bedrock", Options(base_url=fake.base_url, region="us-east-1", **options))
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
