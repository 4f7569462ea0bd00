"""The hold is an upper bound of the charge, for every input a request can carry, on every
kind of upstream: requests of every content kind (text, images as data URIs of any size and as
URLs, PDFs, audio, tools, several choices, streams; on the Messages dialect documents as
base64, text and by URL, which the gateway fetches, typed tools and web_fetch too) on the
simulator and on fakes of OpenAI, an OpenAI-compatible server, Anthropic (its Messages API as
is and translated), Gemini, Vertex AI and Bedrock, each reporting the usage its upstream's
published rule gives at its worst case for what it received (`tests.support.billing_rules`).
One chat service and one set of fakes serve every example, in one event loop: no process per
example."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from itertools import count
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.artifacts import FetchPolicy, LocalBlobStore, ReferenceFetcher, UrlSigner
from gateway.artifacts.addresses import parse_networks
from gateway.artifacts.service import ArtifactService
from gateway.chat.outcomes import ChatOutcome, ChatStreaming
from gateway.errors import GatewayError
from gateway.http.anthropic.bounds import bound_messages
from gateway.http.anthropic.dialect import ANTHROPIC_MESSAGES, MessagesCall
from gateway.http.anthropic.documents import FetchDocument, fetch_url_documents
from gateway.http.anthropic.request import decode_messages, to_chat_request
from gateway.schemas.messages import MessagesRequest
from tests.chat.support import ChatParts, chat_parts
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.document_site import DocumentSite
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.vertex_upstream import FakeVertex, ServiceAccountKey
from tests.support.billing_rules import ANTHROPIC, GEMINI, OPENAI_4O_MINI
from tests.support.documents import jpeg_header, pdf_base64, png_header

KEY, SECRET = "AKIDHOLDBOUND0001", "hold-bound-throwaway-secret"
SERVICE_ACCOUNT = ServiceAccountKey.generate()

CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 1000000
tokens_per_minute = 1000000000

[providers.sim]
kind = "simulator"

[providers.oa]
kind = "openai"
base_url = "{openai}"
api_key = "sk-oa"

[providers.compat]
kind = "openai_compatible"
base_url = "{openai}"
api_key = "sk-compat"

[providers.claude]
kind = "anthropic"
base_url = "{anthropic}"
api_key = "sk-ant"

[providers.gem]
kind = "gemini"
base_url = "{gemini}"
api_key = "gem-key"

[providers.vtx]
kind = "vertex"
project = "test-project"
location = "europe-west4"
base_url = "{vertex}"
credentials_file = "{key_file}"
token_url = "{token_url}"

[providers.bed]
kind = "bedrock"
region = "us-east-1"
base_url = "{bedrock}"

{models}

[tenants.default]
"""
_UPSTREAM_MODELS = {
    "sim": "sim",
    "oa": "gpt-4o-mini",
    "compat": "some-vision-model",
    "claude": "claude-sonnet-4-5",
    "gem": "gemini-2.5-flash",
    "vtx": "gemini-2.5-flash",
    "bed": "anthropic.claude-sonnet-4-5-20250929-v1:0",
}
MODELS = "\n".join(
    f"""
[[models]]
id = "{name}"
provider = "{name}"
upstream_model = "{upstream}"
capability = "chat"
max_output_tokens = 512
pricing = {{ input_usd_per_mtok = 3, output_usd_per_mtok = 15 }}
"""
    for name, upstream in _UPSTREAM_MODELS.items()
)


@dataclass
class World:
    runner: asyncio.Runner
    parts: ChatParts
    ids: Iterator[int]
    documents: str
    """The root URL of a site serving `<n>.pdf`, a PDF of n pages (what `docsite://` names)."""
    fetch: FetchDocument


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The fakes (each billing by its upstream's rule) and the chat service, in one loop."""
    saved = dict(os.environ)
    tmp = tmp_path_factory.mktemp("hold-bound")
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-aws-credentials"),
            "AWS_CONFIG_FILE": str(tmp / "no-aws-config"),
        }
    )
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"):
        os.environ.pop(name, None)
    runner = asyncio.Runner()  # its close() lets the transports closed last finish closing
    openai, anthropic = FakeOpenAI(), FakeAnthropic()
    gemini, vertex = FakeGemini(), FakeVertex(SERVICE_ACCOUNT)
    bedrock = FakeBedrock(credentials=(KEY, SECRET))
    openai.bill, anthropic.bill, bedrock.bill = OPENAI_4O_MINI, ANTHROPIC, ANTHROPIC
    gemini.bill = vertex.bill = GEMINI
    fakes = (openai, anthropic, gemini, vertex, bedrock)
    key_file = tmp / "service-account.json"
    key_file.write_text(json.dumps(SERVICE_ACCOUNT.info()))
    manager: AbstractAsyncContextManager[ChatParts] | None = None
    site = DocumentSite()
    try:
        runner.run(site.start())
        for fake in fakes:
            runner.run(fake.start())
        config = CONFIG.format(
            openai=openai.base_url,
            anthropic=anthropic.base_url,
            gemini=gemini.base_url,
            vertex=vertex.base_url,
            key_file=key_file,
            token_url=vertex.token_url,
            bedrock=bedrock.base_url,
            models=MODELS,
        )
        manager = chat_parts(tmp, config_text=config)
        parts = runner.run(manager.__aenter__())
        policy = FetchPolicy(allow_http=True, allowed_networks=parse_networks(["127.0.0.1/32"]))
        artifacts = ArtifactService(
            parts.store,
            LocalBlobStore(tmp / "blobs"),
            UrlSigner(b"s" * 32),
            ReferenceFetcher(policy),
        )

        async def fetch(url: str, field: str) -> bytes:
            return await artifacts.fetch_document("default", url, field=field)

        documents = f"{site.base_url}/"
        yield World(runner=runner, parts=parts, ids=count(), documents=documents, fetch=fetch)
    finally:
        if manager is not None:
            runner.run(manager.__aexit__(None, None, None))
        for fake in fakes:
            runner.run(fake.stop())
        runner.run(site.stop())
        runner.close()
        os.environ.clear()
        os.environ.update(saved)


def _data(header: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(header).decode()}"


_sizes = st.tuples(st.integers(1, 9000), st.integers(1, 9000))
_images = st.one_of(
    st.builds(lambda s: _data(png_header(*s), "image/png"), _sizes),
    st.builds(lambda s: _data(jpeg_header(*s), "image/jpeg"), _sizes),
    st.just("https://images.example/a.png"),
)
_chat_parts = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=40)),
    st.builds(lambda url: {"type": "image_url", "image_url": {"url": url}}, _images),
    st.builds(
        lambda pages: {
            "type": "file",
            "file": {
                "filename": "a.pdf",
                "file_data": f"data:application/pdf;base64,{pdf_base64(pages)}",
            },
        },
        st.integers(1, 4),
    ),
    st.just({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}),
)
_TOOL = {
    "type": "function",
    "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
}


@st.composite
def openai_calls(draw: st.DrawFn, model: str) -> dict[str, Any]:
    content = draw(st.lists(_chat_parts, min_size=1, max_size=5))
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_completion_tokens": draw(st.integers(1, 512)),
    }
    if draw(st.booleans()):
        body["tools"] = [_TOOL]
    if draw(st.booleans()):
        body["n"] = 2
    if draw(st.booleans()):
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _block_image(draw: st.DrawFn) -> dict[str, Any]:
    url = draw(_images)
    if url.startswith("data:"):
        media_type, data = url[5:].split(";base64,")
        source = {"type": "base64", "media_type": media_type, "data": data}
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}


@st.composite
def messages_calls(draw: st.DrawFn, model: str) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": draw(st.text(max_size=40))}]
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["image", "pdf", "url_document", "text_document"]))
        if kind == "image":
            blocks.append(_block_image(draw))
        elif kind == "url_document":
            url = f"docsite://{draw(st.integers(1, 4))}.pdf"
            blocks.append({"type": "document", "source": {"type": "url", "url": url}})
        elif kind == "pdf":
            data = pdf_base64(draw(st.integers(1, 4)))
            source = {"type": "base64", "media_type": "application/pdf", "data": data}
            blocks.append({"type": "document", "source": source})
        else:
            source = {"type": "text", "media_type": "text/plain", "data": "plain words"}
            blocks.append({"type": "document", "source": source})
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": draw(st.integers(1, 512)),
        "messages": [{"role": "user", "content": blocks}],
    }
    tools: list[dict[str, Any]] = []
    if draw(st.booleans()):
        tools.append({"name": "f", "input_schema": {"type": "object"}})
    if draw(st.booleans()):
        tools.append({"type": "bash_20250124", "name": "bash"})
    if draw(st.booleans()):
        fetch: dict[str, Any] = {"type": "web_fetch_20250910", "name": "web_fetch"}
        if draw(st.booleans()):
            fetch["max_uses"] = draw(st.integers(1, 50))
        if draw(st.booleans()):
            fetch["max_content_tokens"] = draw(st.integers(1, 200_000))
        tools.append(fetch)
    if tools:
        body["tools"] = tools
    if draw(st.booleans()):
        body["stream"] = True
    return body


async def _call(world: World, dialect: str, body: dict[str, Any], n: int) -> ChatOutcome:
    """The call as its endpoint makes it (`gateway.api.chat`, `gateway.api.messages`)."""
    parts = world.parts
    raw = msgspec.json.encode(body).replace(b"docsite://", world.documents.encode())
    caller = parts.caller()
    if dialect == "openai":
        return await parts.handle(caller, raw, request_id=f"req_{n}", idempotency_key=None)
    request, decoded = decode_messages(raw, MessagesRequest)
    chat, problems, _ = to_chat_request(request, decoded)
    await fetch_url_documents(decoded, world.fetch)
    inputs = bound_messages(decoded)
    return await parts.service.handle(
        caller,
        chat,
        body_size=len(raw),
        dialect=ANTHROPIC_MESSAGES,
        request_id=f"req_{n}",
        idempotency_key=None,
        native=MessagesCall(decoded, {}, problems, inputs),
    )


async def _charged_against_hold(
    world: World, dialect: str, body: dict[str, Any], n: int
) -> tuple[int | None, int]:
    """(the call's hold, None when it was refused before admission; what it was charged)."""
    parts = world.parts
    before = (await parts.store.wallet("default")).balance_units
    holds = len(parts.gatekeeper.holds)
    try:
        outcome = await _call(world, dialect, body, n)
    except GatewayError as exc:  # refused (the request, or the upstream refusing it)
        assert exc.status_code < 500, exc
    else:
        if isinstance(outcome, ChatStreaming):
            async for _ in outcome.events.events():
                pass
            await outcome.events.close()
    after = (await parts.store.wallet("default")).balance_units
    hold = parts.gatekeeper.holds[-1] if len(parts.gatekeeper.holds) > holds else None
    return hold, before - after


TARGETS = [
    *(("openai", model) for model in _UPSTREAM_MODELS),
    ("messages", "claude"),  # Anthropic's Messages API as is
    ("messages", "gem"),  # translated from it
]


@pytest.mark.parametrize(("dialect", "model"), TARGETS)
@settings(
    max_examples=12,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_the_charge_never_exceeds_the_hold_on_any_upstream_for_any_input(
    world: World, dialect: str, model: str, data: st.DataObject
) -> None:
    calls = openai_calls(model) if dialect == "openai" else messages_calls(model)
    body = data.draw(calls)
    hold, charge = world.runner.run(_charged_against_hold(world, dialect, body, next(world.ids)))
    if hold is None:
        assert charge == 0
    else:
        assert 0 <= charge <= hold, (hold, charge)


def test_the_billing_rules_read_what_they_bill() -> None:
    """The fakes' rules see the images and pages they are given (a rule that saw nothing
    would make the property above hold for any hold)."""
    image = _data(png_header(4000, 3000), "image/png")
    part = {"type": "image_url", "image_url": {"url": image}}
    request = {"messages": [{"role": "user", "content": [part]}], "max_completion_tokens": 7}
    assert OPENAI_4O_MINI(request) == (4 + 2833 + 4 * 5667 + len("user") + len("image_url"), 7)
    pdf = {"type": "base64", "media_type": "application/pdf", "data": pdf_base64(3)}
    request = {"messages": [{"role": "user", "content": [{"type": "document", "source": pdf}]}]}
    prompt, _ = ANTHROPIC(request)
    assert prompt >= 3 * ANTHROPIC.pdf_page
