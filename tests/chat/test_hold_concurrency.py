"""Thirty calls at once on a 10-credit wallet never overdraw it, whatever they carry, on both
stores (SQLite, and a real Redis): the hold bounds the charge, so admission's guarantee holds.

Two requests the hold did not bound: a Messages call with a URL `document` to an Anthropic
upstream (which fetched the PDF: a 215-byte call held 0.9972 credits and was charged
540.2304; thirty at once took 10 credits to between -1,070 and -5,392): the gateway now
fetches the document itself and sends its bytes, held by its pages; and a 24.5 KB chat of 400
short `image_url` parts on the simulator (85 tokens an image: held 14.709, charged 20.4072;
here priced so that its old hold fits the wallet and its charge does not)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gateway.artifacts import FetchPolicy, LocalBlobStore, ReferenceFetcher, UrlSigner
from gateway.artifacts.addresses import parse_networks
from gateway.artifacts.service import ArtifactService
from gateway.billing.money import UNITS_PER_CREDIT
from gateway.chat.outcomes import ChatCompleted
from gateway.errors import GatewayError, InsufficientCredits
from gateway.http.anthropic.bounds import bound_messages
from gateway.http.anthropic.dialect import ANTHROPIC_MESSAGES, MessagesCall
from gateway.http.anthropic.documents import fetch_url_documents
from gateway.http.anthropic.request import decode_messages, to_chat_request
from gateway.schemas.messages import MessagesRequest
from gateway.store.base import Store
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore
from tests.chat.support import ChatParts, chat_parts
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.document_site import DocumentSite
from tests.support.billing_rules import ANTHROPIC

CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.sim]
kind = "simulator"

[providers.claude]
kind = "anthropic"
base_url = "{base_url}"
api_key = "sk-ant"

[[models]]
id = "sim-cheap"
provider = "sim"
capability = "chat"
max_output_tokens = 16
pricing = {{ input_usd_per_mtok = 0.3, output_usd_per_mtok = 0 }}

[[models]]
id = "claude"
provider = "claude"
upstream_model = "claude-up"
capability = "chat"
max_output_tokens = 64
pricing = {{ input_usd_per_mtok = 0.01, output_usd_per_mtok = 0.01 }}

[tenants.default]
"""
CALLS = 30
PAGES = 2
FETCHED_PDF_TOKENS = 180_000
"""What Anthropic billed for a document it fetched itself (1.8 credits at this price)."""


def url_document(url: str) -> dict[str, Any]:
    document = {"type": "document", "source": {"type": "url", "url": url}}
    content = [document, {"type": "text", "text": "Summarize it."}]
    return {"model": "claude", "max_tokens": 64, "messages": [{"role": "user", "content": content}]}


def _bill(request: dict[str, Any]) -> tuple[int, int]:
    """Anthropic's rule; a document it must fetch itself, at what it billed for one."""
    for message in request.get("messages") or ():
        for block in message.get("content") or ():
            if isinstance(block, dict) and (block.get("source") or {}).get("type") == "url":
                return FETCHED_PDF_TOKENS, 64
    return ANTHROPIC(request)


IMAGES = {
    "model": "sim-cheap",
    "max_completion_tokens": 16,
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": f"https://i.example/{i:03}.png"}}
                for i in range(400)
            ],
        }
    ],
}


async def _messages_call(parts: ChatParts, n: int, url: str, artifacts: ArtifactService) -> object:
    """As `POST /v1/messages` makes it (`gateway.api.messages`)."""
    raw = msgspec.json.encode(url_document(url))
    request, decoded = decode_messages(raw, MessagesRequest)
    chat, problems, _ = to_chat_request(request, decoded)

    async def fetch(url: str, field: str) -> bytes:
        return await artifacts.fetch_document("default", url, field=field)

    await fetch_url_documents(decoded, fetch)
    inputs = bound_messages(decoded)
    return await parts.service.handle(
        parts.caller(),
        chat,
        body_size=len(raw),
        dialect=ANTHROPIC_MESSAGES,
        request_id=f"req_doc_{n}",
        idempotency_key=None,
        native=MessagesCall(decoded, {}, problems, inputs),
    )


async def _images_call(parts: ChatParts, n: int, url: str, artifacts: ArtifactService) -> object:
    body = msgspec.json.encode(IMAGES)
    return await parts.handle(parts.caller(), body, request_id=f"req_img_{n}", idempotency_key=None)


async def _ledger_sum(store: Store) -> int:
    total, after = 0, None
    while True:
        page = await store.ledger("default", limit=100, after=after)
        total += sum(entry.amount_units for entry in page.entries)
        if not page.has_more or not page.entries:
            return total
        after = page.entries[-1].id


Call = Callable[[ChatParts, int], Awaitable[object]]


async def _thirty_at_once(store: Store, tmp_path: Path, call: Call) -> list[Any]:
    """The calls' outcomes (errors returned), after checking the wallet: never below zero,
    and its balance the sum of its ledger."""
    policy = FetchPolicy(allow_http=True, allowed_networks=parse_networks(["127.0.0.1/32"]))
    artifacts = ArtifactService(
        store,
        LocalBlobStore(tmp_path / "blobs"),
        UrlSigner(b"s" * 32),
        ReferenceFetcher(policy),
    )
    async with FakeAnthropic() as fake, DocumentSite() as site:
        url = f"{site.base_url}/{PAGES}.pdf"
        fake.bill = _bill
        config = CONFIG.format(base_url=fake.base_url)
        async with chat_parts(
            tmp_path, config_text=config, grant=10 * UNITS_PER_CREDIT, store=store
        ) as parts:
            outcomes = await asyncio.gather(
                *(call(parts, n, url, artifacts) for n in range(CALLS)), return_exceptions=True
            )
            wallet = await store.wallet("default")
            assert wallet.balance_units >= 0, [repr(o)[:80] for o in outcomes]
            assert wallet.balance_units == await _ledger_sum(store)
            assert wallet.held_units == 0
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, GatewayError):
            raise outcome
    return outcomes


@pytest.fixture(params=["sqlite", "redis"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Awaitable[Store]]:
    """Opens the store the test runs on (closed by `chat_parts`), in the test's loop."""

    async def sqlite() -> Store:
        store = SqliteStore(tmp_path / "gateway.db")
        await store.open()
        return store

    if request.param == "sqlite":
        return sqlite
    url = request.getfixturevalue("redis_url")

    async def redis() -> Store:
        store = RedisStore(url, prefix=f"test:{uuid.uuid4().hex}:")
        await store.open()
        return store

    return redis


def test_thirty_url_documents_at_once_never_overdraw_a_10_credit_wallet(
    open_store: Callable[[], Awaitable[Store]], tmp_path: Path
) -> None:
    async def main() -> list[Any]:
        return await _thirty_at_once(await open_store(), tmp_path, _messages_call)

    outcomes = asyncio.run(main())
    assert all(isinstance(o, ChatCompleted) for o in outcomes), outcomes[:2]


def test_thirty_chats_of_400_images_at_once_never_overdraw_a_10_credit_wallet(
    open_store: Callable[[], Awaitable[Store]], tmp_path: Path
) -> None:
    async def main() -> list[Any]:
        return await _thirty_at_once(await open_store(), tmp_path, _images_call)

    outcomes = asyncio.run(main())
    assert all(isinstance(o, InsufficientCredits) for o in outcomes), outcomes[:2]
