"""The Anthropic adapter's tests: a provider pointed at a real local fake Messages API, and the
bodies and stream readers they share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from providers.anthropic import Options, create
from providers.base import ChatProvider, ChatStream
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.providers.adapter_checks import drain, run

__all__ = ["BODY", "STREAM_BODY", "collect", "drain", "reassemble", "run", "sent", "upstream"]


@asynccontextmanager
async def upstream(**options: Any) -> AsyncIterator[tuple[FakeAnthropic, ChatProvider]]:
    """A fake upstream and a provider pointed at it, both closed afterwards."""
    async with FakeAnthropic() as fake:
        provider = create("claude", Options(base_url=fake.base_url, **options))
        try:
            yield fake, provider
        finally:
            await provider.close()


BODY: dict[str, Any] = {
    "model": "claude-upstream",
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "max_completion_tokens": 256,
}


STREAM_BODY: dict[str, Any] = {**BODY, "stream": True, "stream_options": {"include_usage": True}}


async def sent(provider: ChatProvider, fake: FakeAnthropic, body: dict[str, Any]) -> Any:
    """What the upstream received for `body` (a complete call)."""
    await provider.complete(body)
    return fake.requests[-1].json


async def collect(stream: ChatStream) -> list[dict[str, Any]]:
    try:
        return [chunk async for chunk in stream]
    finally:
        await stream.aclose()


def reassemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """A streamed answer put back together the way an OpenAI client does."""
    content, reasoning, finish = "", "", None
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or ():
                into = calls.setdefault(call["index"], {"arguments": ""})
                into.update({k: call[k] for k in ("id", "type") if k in call})
                function = call.get("function") or {}
                if "name" in function:
                    into["name"] = function["name"]
                into["arguments"] += function.get("arguments") or ""
            finish = choice["finish_reason"] or finish
    return {"content": content, "reasoning": reasoning, "calls": calls, "finish": finish}
