"""The one usage rule (`gateway.chat.usage`, docs/api.md "Money"): the upstream's counts are
charged when usable; output it did not count (absent, zero, malformed, a stream cut before its
final report) is the delivered output, a token per 4 characters rounded up and never less than
a token per output chunk; a prompt it did not count is the request's bytes / 4 + 1.

`test_every_upstream_is_charged_by_the_one_rule` drives the real adapters against the fakes
of `tests/fakes/` through the chat service, for every upstream kind."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gateway.billing.pricing import ChatPrice
from gateway.chat.outcomes import ChatCompleted, ChatStreaming
from gateway.chat.usage import Delivered, charge_for
from gateway.config.schema import ModelEntry, Pricing
from providers.base import Usage
from providers.simulator.generator import prompt_tokens as simulator_prompt_tokens
from tests.chat.support import chat_parts
from tests.fakes import anthropic_upstream as anthropic
from tests.fakes import bedrock_upstream as bedrock
from tests.fakes import gemini_upstream as gemini
from tests.fakes import openai_upstream as openai
from tests.fakes.azure_upstream import FakeAzure
from tests.fakes.vertex_upstream import FakeVertex, ServiceAccountKey

SONNET = ChatPrice.of(
    ModelEntry(
        id="claude",
        provider="claude",
        capability="chat",
        markup=Decimal(1000),
        pricing=Pricing(
            input_usd_per_mtok=Decimal(3),
            output_usd_per_mtok=Decimal(15),
            cached_input_usd_per_mtok=Decimal("0.3"),
            cache_write_usd_per_mtok=Decimal("3.75"),
        ),
    )
)
UNITS_PER_CREDIT = 10_000


def _delivered(chars: int, chunks: int) -> Delivered:
    delivered = Delivered()
    delivered.chars, delivered.chunks = chars, chunks
    return delivered


def test_the_reported_prompt_is_charged_not_the_request_size() -> None:
    reported = Usage(prompt_tokens=424, completion_tokens=12, total_tokens=436, partial=True)
    charge = charge_for(
        SONNET, reported, body_size=1_800, delivered=_delivered(20, 5), complete=False
    )
    # 424 x $3 + 12 x $15 per million tokens, 1000 credits per USD: 1.2720 + 0.1800
    assert charge.units == int(Decimal("1.4520") * UNITS_PER_CREDIT)
    assert (charge.prompt_tokens, charge.completion_tokens) == (424, 12)


def test_cache_reads_and_writes_reported_so_far_keep_their_prices() -> None:
    reported = Usage(
        prompt_tokens=3 + 1111 + 418,
        completion_tokens=1,
        total_tokens=1533,
        cached_tokens=1111,
        cache_creation_tokens=418,
        partial=True,
    )
    charge = charge_for(SONNET, reported, body_size=6_000, complete=False)
    # 3 x $3 + 1111 x $0.30 + 418 x $3.75 + 1 x $15, per million tokens, x1000: 1.9248
    expected = (9 + Decimal("333.3") + Decimal("1567.5") + 15) / 1000
    assert charge.units == int((expected * UNITS_PER_CREDIT).quantize(Decimal(1)))


def test_a_cut_stream_is_charged_what_it_delivered_when_more_than_reported() -> None:
    reported = Usage(prompt_tokens=43, completion_tokens=1, total_tokens=44, partial=True)
    chunks = charge_for(
        SONNET, reported, body_size=500, delivered=_delivered(30, 30), complete=False
    )
    assert chunks.completion_tokens == 30  # never less than a token a chunk
    chars = charge_for(
        SONNET, reported, body_size=500, delivered=_delivered(215, 9), complete=False
    )
    assert chars.completion_tokens == 54 and chars.estimated  # ceil(215 / 4)
    final = Usage(prompt_tokens=43, completion_tokens=1, total_tokens=44)
    whole = charge_for(SONNET, final, body_size=500, delivered=_delivered(215, 9))
    assert whole.completion_tokens == 1 and not whole.estimated  # complete, usable: as reported


def test_without_a_report_the_request_size_is_the_prompt() -> None:
    charge = charge_for(SONNET, None, body_size=400, delivered=_delivered(10, 7), complete=False)
    assert (charge.prompt_tokens, charge.completion_tokens) == (101, 7)
    output_only = Usage(completion_tokens=66, total_tokens=66, partial=True)
    charge = charge_for(SONNET, output_only, body_size=400, complete=False)
    assert (charge.prompt_tokens, charge.completion_tokens) == (101, 66)
    negative = Usage(prompt_tokens=-5, completion_tokens=-9)
    charge = charge_for(SONNET, negative, body_size=400, delivered=_delivered(10, 0))
    assert (charge.prompt_tokens, charge.completion_tokens) == (101, 3) and charge.units > 0


def test_an_estimate_never_passes_the_output_the_upstream_was_asked_for() -> None:
    """Tokens of more than 4 characters (long words, runs of spaces) would otherwise take the
    estimate past max_completion_tokens, and the charge past the hold."""
    spaces = _delivered(4_000, 10)
    assert (
        charge_for(SONNET, None, body_size=80, delivered=spaces, limit=100).completion_tokens == 100
    )
    reported = Usage(prompt_tokens=5, completion_tokens=180, partial=True)
    cut = charge_for(SONNET, reported, body_size=80, delivered=spaces, complete=False, limit=100)
    assert cut.completion_tokens == 180  # what the upstream counted is never lowered


# Every upstream kind ------------------------------------------------------------------------

TEXT = (
    "Tomorrow's forecast: overcast mornings, brightening afternoons, temperatures climbing "
    "steadily toward twenty-three degrees, northwesterly breezes strengthening considerably "
    "overnight, occasional thunderstorms possible."
)
"""Long words: a quarter of its characters is more tokens than it has words (chunks)."""
REPORTED_PROMPT, REPORTED_OUTPUT = 31, 47
PRICE = "pricing = { input_usd_per_mtok = 2, output_usd_per_mtok = 11 }"
CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 1000
tokens_per_minute = 100000000

[providers.up]
{provider}

[[models]]
id = "m"
provider = "up"
upstream_model = "{upstream_model}"
capability = "chat"
markup = 1000
max_output_tokens = 400
{price}

[tenants.default]
"""
VERTEX_KEY = ServiceAccountKey.generate()
USAGE_KINDS = ("reported", "absent", "zero", "malformed")


def _openai_answer(usage: str) -> dict[str, Any]:
    body = openai.default_completion({"model": "up"}, TEXT)
    counts = {
        "reported": {
            "prompt_tokens": REPORTED_PROMPT,
            "completion_tokens": REPORTED_OUTPUT,
            "total_tokens": REPORTED_PROMPT + REPORTED_OUTPUT,
        },
        "zero": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "malformed": {"prompt_tokens": "31", "completion_tokens": -47, "total_tokens": None},
    }
    if usage == "absent":
        del body["usage"]
    else:
        body["usage"] = counts[usage]
    return body


def _anthropic_answer(usage: str) -> dict[str, Any]:
    counts = {
        "reported": (REPORTED_PROMPT, REPORTED_OUTPUT),
        "zero": (0, 0),
        "malformed": (-31, -47),
    }
    prompt, output = counts.get(usage, (0, 0))
    whole = anthropic.message(anthropic.text(TEXT), input_tokens=prompt, output_tokens=output)
    if usage == "absent":
        del whole["usage"]
    return whole


def _gemini_meta(usage: str) -> dict[str, Any] | None:
    counts = {
        "reported": (REPORTED_PROMPT, REPORTED_OUTPUT),
        "zero": (0, 0),
        "malformed": (-31, -47),
    }
    if usage == "absent":
        return None
    prompt, output = counts[usage]
    return {"promptTokenCount": prompt, "candidatesTokenCount": output, "totalTokenCount": 0}


def _gemini_answer(usage: str) -> dict[str, Any]:
    body = gemini.response(gemini.candidate(gemini.text(TEXT)))
    meta = _gemini_meta(usage)
    if meta is None:
        del body["usageMetadata"]
    else:
        body["usageMetadata"] = meta
    return body


def _gemini_cut_events() -> list[Any]:
    """As Vertex streams: `usageMetadata` without output counts on every event but the last."""
    events = gemini.events_for(TEXT)
    for event in events[:-1]:
        event["usageMetadata"] = {"promptTokenCount": REPORTED_PROMPT}
    return events


def _bedrock_answer(usage: str) -> dict[str, Any]:
    counts = {
        "reported": (REPORTED_PROMPT, REPORTED_OUTPUT),
        "zero": (0, 0),
        "malformed": (-31, -47),
    }
    body = bedrock.answer(bedrock.text(TEXT))
    if usage == "absent":
        del body["usage"]
    else:
        prompt, output = counts[usage]
        body["usage"] = {"inputTokens": prompt, "outputTokens": output, "totalTokens": 0}
    return body


@dataclass(frozen=True)
class Upstream:
    """One upstream kind: its routing-file section, its fake, and what the fake answers."""

    provider: str
    """The provider's TOML (`{url}`, `{key_file}` filled in)."""
    fake: Callable[[], Any] | None
    answer: Callable[[str], Any] | None
    """(usage kind) -> the fake's reply of a whole answer saying TEXT."""
    cut: Callable[[], Any] | None
    """The fake's reply of a stream of TEXT cut before its end."""
    upstream_model: str = "up-model"
    cut_prompt: int = 0
    """The prompt count the upstream reported before the cut (0: none)."""


def _anthropic_reply(usage: str) -> anthropic.Reply:
    return anthropic.Reply(message=_anthropic_answer(usage))


def _anthropic_cut() -> anthropic.StreamReply:
    # message_start (its prompt count and 1 output token), ping, the block's start, 9 words
    events = anthropic.events_for(_anthropic_answer("reported"))
    return anthropic.StreamReply(events=events, break_after=12)


UPSTREAMS: dict[str, Upstream] = {
    "simulator": Upstream(
        provider='kind = "simulator"',
        fake=None,
        answer=None,
        cut=None,
    ),
    "openai": Upstream(
        provider='kind = "openai"\nbase_url = "{url}"\napi_key = "sk-test"',
        fake=lambda: openai.FakeOpenAI(text=TEXT),
        answer=lambda usage: openai.Reply(body=_openai_answer(usage)),
        cut=lambda: openai.StreamReply(break_after=10),
    ),
    "azure_openai": Upstream(
        provider='kind = "azure_openai"\nbase_url = "{url}"\napi_version = "2024-10-21"\n'
        'api_key = "az-key"',
        fake=lambda: FakeAzure(api_key="az-key", text=TEXT),
        answer=lambda usage: openai.Reply(body=_openai_answer(usage)),
        cut=lambda: openai.StreamReply(break_after=10),
    ),
    "openai_compatible": Upstream(
        provider='kind = "openai_compatible"\nbase_url = "{url}"\nstream_options = false',
        fake=lambda: openai.FakeOpenAI(text=TEXT),
        answer=lambda usage: openai.Reply(body=_openai_answer(usage)),
        cut=lambda: openai.StreamReply(break_after=10),
    ),
    "anthropic": Upstream(
        provider='kind = "anthropic"\nbase_url = "{url}"\napi_key = "sk-ant-test"',
        fake=anthropic.FakeAnthropic,
        answer=_anthropic_reply,
        cut=_anthropic_cut,
        cut_prompt=REPORTED_PROMPT,
    ),
    "gemini": Upstream(
        provider='kind = "gemini"\nbase_url = "{url}"\napi_key = "g-test"',
        fake=gemini.FakeGemini,
        answer=lambda usage: gemini.Reply(body=_gemini_answer(usage)),
        cut=lambda: gemini.StreamReply(events=_gemini_cut_events(), break_after=9),
        cut_prompt=REPORTED_PROMPT,
    ),
    "vertex": Upstream(
        provider='kind = "vertex"\nproject = "test-project"\nlocation = "europe-west4"\n'
        'base_url = "{url}"\ncredentials_file = "{key_file}"\ntoken_url = "{token_url}"',
        fake=lambda: FakeVertex(VERTEX_KEY),
        answer=lambda usage: gemini.Reply(body=_gemini_answer(usage)),
        cut=lambda: gemini.StreamReply(events=_gemini_cut_events(), break_after=9),
        upstream_model="gemini-2.5-flash",
        cut_prompt=REPORTED_PROMPT,
    ),
    "bedrock": Upstream(
        provider='kind = "bedrock"\nregion = "us-east-1"\nbase_url = "{url}"\n'
        'api_key = "bedrock-key"',
        fake=lambda: bedrock.FakeBedrock(bearer="bedrock-key", text=TEXT),
        answer=lambda usage: bedrock.Reply(body=_bedrock_answer(usage)),
        cut=lambda: bedrock.StreamReply(events=bedrock.events_for(TEXT), break_after=10),
        upstream_model="anthropic.claude-sonnet-4-5-20250929-v1:0",
    ),
}
CASES = [
    (kind, case)
    for kind in UPSTREAMS
    for case in (*USAGE_KINDS, "cut")
    if kind != "simulator" or case in ("reported", "cut")  # the simulator always counts
]


@asynccontextmanager
async def _upstream(upstream: Upstream, tmp_path: Path) -> AsyncIterator[tuple[Any, str]]:
    """The fake (None for the simulator) and the provider's TOML pointing at it."""
    if upstream.fake is None:
        yield None, upstream.provider
        return
    key_file = tmp_path / "service-account.json"
    key_file.write_text(json.dumps(VERTEX_KEY.info()))
    async with upstream.fake() as fake:
        token_url = getattr(fake, "token_url", "")
        section = upstream.provider.format(
            url=fake.base_url, key_file=key_file, token_url=token_url
        )
        yield fake, section + "\ntimeout_seconds = 5\nstream_read_timeout_seconds = 5"


def _sse_chunks(frames: bytes) -> list[dict[str, Any]]:
    chunks = []
    for line in frames.split(b"\n"):
        if line.startswith(b"data: {"):
            chunks.append(msgspec.json.decode(line[6:]))
    return chunks


@pytest.mark.parametrize(("kind", "case"), CASES)
def test_every_upstream_is_charged_by_the_one_rule(tmp_path: Path, kind: str, case: str) -> None:
    upstream = UPSTREAMS[kind]
    stream = case == "cut"
    prompt_text = "What will the weather be like tomorrow?"
    if kind == "simulator" and stream:
        prompt_text += " [[sim:fail_after=6]]"
    request = {"model": "m", "messages": [{"role": "user", "content": prompt_text}]}
    if stream:
        request["stream"] = True
    body = msgspec.json.encode(request)

    async def scenario() -> tuple[int, str, int, dict[str, Any] | None]:
        async with _upstream(upstream, tmp_path) as (fake, provider):
            text = CONFIG.format(
                provider=provider, upstream_model=upstream.upstream_model, price=PRICE
            )
            if fake is not None:
                assert upstream.answer is not None and upstream.cut is not None
                fake.enqueue(upstream.cut() if stream else upstream.answer(case))
            async with chat_parts(tmp_path, config_text=text) as parts:
                outcome = await parts.handle(
                    parts.caller(), body, request_id="req_1", idempotency_key=None
                )
                answered: dict[str, Any] | None = None
                if isinstance(outcome, ChatStreaming):
                    frames = b""
                    try:
                        async for frame in outcome.events.events():
                            frames += frame
                    finally:
                        await outcome.events.close()
                    chunks = _sse_chunks(frames)
                    deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
                    said = [d.get("content") or "" for d in deltas]
                    delivered_text, delivered_chunks = "".join(said), sum(1 for s in said if s)
                else:
                    assert isinstance(outcome, ChatCompleted)
                    answered = msgspec.json.decode(outcome.body)
                    delivered_text = answered["choices"][0]["message"]["content"]
                    delivered_chunks = 0
                page = await parts.store.ledger("default", limit=10)
                [charge] = [e for e in page.entries if e.kind == "charge"]
                return abs(charge.amount_units), delivered_text, delivered_chunks, answered

    charged, delivered_text, delivered_chunks, answered = asyncio.run(scenario())
    price = ChatPrice.of(
        ModelEntry(
            id="m",
            provider="up",
            capability="chat",
            markup=Decimal(1000),
            pricing=Pricing(input_usd_per_mtok=Decimal(2), output_usd_per_mtok=Decimal(11)),
        )
    )
    assert delivered_text
    assert kind == "simulator" or TEXT.startswith(delivered_text)
    estimate_prompt = len(body) // 4 + 1
    if case == "reported":
        assert answered is not None or stream
        if kind == "simulator":
            assert answered is not None
            prompt, output = (
                answered["usage"]["prompt_tokens"],
                answered["usage"]["completion_tokens"],
            )
            assert output > 0 and not answered["usage"].get("estimated")
        else:
            prompt, output = REPORTED_PROMPT, REPORTED_OUTPUT
    elif case == "cut":
        assert kind == "simulator" or len(delivered_text) < len(TEXT)  # cut before its end
        prompt = upstream.cut_prompt or estimate_prompt
        if kind == "simulator":  # it counts the prompt at the stream's start
            sent = json.loads(body)
            prompt = simulator_prompt_tokens(sent["messages"], sent.get("tools"))
        reported_output = 1 if kind == "anthropic" else 0  # message_start's
        output = max(reported_output, -(-len(delivered_text) // 4), delivered_chunks)
        assert kind == "simulator" or output == -(-len(delivered_text) // 4) > delivered_chunks
    else:
        prompt, output = estimate_prompt, -(-len(TEXT) // 4)
        assert answered is not None and answered["usage"]["estimated"] is True
        assert answered["usage"]["completion_tokens"] == output
    assert charged == price.charge_units(prompt, output), (charged, prompt, output)
