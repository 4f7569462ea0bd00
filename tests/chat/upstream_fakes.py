"""A chat service in front of one fake upstream of each kind (Anthropic, OpenAI, Gemini,
Bedrock) and the simulator, for the tests of what each is sent: `fake_upstreams(tmp_path)`
yields the parts and the fakes by kind. Model ids are the kind's name (`openai`, `gemini`, ...,
`sim`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from gateway.chat.outcomes import ChatCompleted, ChatOutcome, ChatStreaming
from gateway.http.anthropic.dialect import ANTHROPIC_MESSAGES, MessagesCall
from gateway.http.anthropic.request import decode_messages, to_chat_request
from gateway.schemas.messages import MessagesRequest
from tests.chat.support import ChatParts, chat_parts
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.openai_upstream import FakeOpenAI

__all__ = [
    "BEDROCK_MODEL",
    "Upstreams",
    "fake_upstreams",
    "messages_call",
    "messages_call_streamed",
]

BEDROCK_KEY = "bedrock-api-key"
VERSION = {"anthropic-version": "2023-06-01"}
BEDROCK_MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.sim]
kind = "simulator"

[providers.anthropic]
kind = "anthropic"
base_url = "{anthropic}"
api_key = "sk-ant"

[providers.openai]
kind = "openai"
base_url = "{openai}"
api_key = "sk-openai"

[providers.gemini]
kind = "gemini"
base_url = "{gemini}"
api_key = "g-key"

[providers.bedrock]
kind = "bedrock"
region = "us-east-1"
base_url = "{bedrock}"
api_key = "{bedrock_key}"
{models}
[routing.auto]
chat = {auto}

[tenants.default]
"""
MODEL = """
[[models]]
id = "{name}"
provider = "{name}"
upstream_model = "{upstream}"
capability = "chat"
max_output_tokens = 1024
pricing = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 2 }}
"""
UPSTREAM_MODELS = {
    "sim": "sim",
    "anthropic": "claude-up",
    "openai": "gpt-up",
    "gemini": "gemini-up",
    "bedrock": BEDROCK_MODEL,
}


@dataclass(frozen=True, slots=True)
class Upstreams:
    parts: ChatParts
    anthropic: FakeAnthropic
    openai: FakeOpenAI
    gemini: FakeGemini
    bedrock: FakeBedrock

    def sent(self, kind: str) -> Any:
        """The JSON body of the last request the fake of `kind` received."""
        fake: FakeAnthropic | FakeOpenAI | FakeGemini | FakeBedrock = getattr(self, kind)
        return fake.requests[-1].json


@asynccontextmanager
async def fake_upstreams(
    tmp_path: Path, auto: tuple[str, ...] = ("sim",)
) -> AsyncIterator[Upstreams]:
    async with AsyncExitStack() as stack:
        anthropic = await stack.enter_async_context(FakeAnthropic())
        openai = await stack.enter_async_context(FakeOpenAI())
        gemini = await stack.enter_async_context(FakeGemini())
        bedrock = await stack.enter_async_context(FakeBedrock(bearer=BEDROCK_KEY))
        models = "".join(
            MODEL.format(name=name, upstream=upstream) for name, upstream in UPSTREAM_MODELS.items()
        )
        config = CONFIG.format(
            anthropic=anthropic.base_url,
            openai=openai.base_url,
            gemini=gemini.base_url,
            bedrock=bedrock.base_url,
            bedrock_key=BEDROCK_KEY,
            models=models,
            auto=msgspec.json.encode(list(auto)).decode(),
        )
        parts = await stack.enter_async_context(chat_parts(tmp_path, config_text=config))
        yield Upstreams(parts, anthropic, openai, gemini, bedrock)


async def messages_call(parts: ChatParts, body: dict[str, Any]) -> ChatCompleted:
    """`body` as `POST /v1/messages` gives it to the chat service, answered whole."""
    outcome = await _messages(parts, body)
    assert isinstance(outcome, ChatCompleted)
    return outcome


async def messages_call_streamed(parts: ChatParts, body: dict[str, Any]) -> ChatStreaming:
    """`body` (with `stream: true`) as `POST /v1/messages` gives it to the chat service."""
    outcome = await _messages(parts, body)
    assert isinstance(outcome, ChatStreaming)
    return outcome


async def _messages(parts: ChatParts, body: dict[str, Any]) -> ChatOutcome:
    raw_body = msgspec.json.encode(body)
    request, raw = decode_messages(raw_body, MessagesRequest)
    translation = to_chat_request(request, raw)
    outcome = await parts.service.handle(
        parts.caller(),
        translation.request,
        body_size=len(raw_body),
        dialect=ANTHROPIC_MESSAGES,
        request_id="req_test",
        idempotency_key=None,
        native=MessagesCall(
            raw,
            {"anthropic-version": "2023-06-01"},
            translation.problems,
            dropped=translation.dropped,
        ),
    )
    return outcome
