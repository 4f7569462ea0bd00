"""A Messages request's URL documents are fetched by the gateway under the reference rules and
sent as their bytes (`gateway.http.anthropic.documents`), or refused naming the block."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

from gateway.artifacts import FetchPolicy, LocalBlobStore, ReferenceFetcher, UrlSigner
from gateway.artifacts.addresses import parse_networks
from gateway.artifacts.service import ArtifactService
from gateway.errors import InvalidRequest, ValidationFailed
from gateway.http.anthropic.bounds import bound_messages
from gateway.http.anthropic.documents import MAX_FETCHED, FetchDocument, fetch_url_documents
from gateway.store.sqlite import SqliteStore
from tests.fakes.document_site import DocumentSite
from tests.support.documents import pdf_base64

PDF = base64.b64decode(pdf_base64(3))


def _fetch(tmp_path: Path, *, local: bool = True) -> FetchDocument:
    """`ArtifactService.fetch_document` as the Messages controller uses it; `local`: the test
    site may be reached (else production's rules: https, public addresses only)."""
    policy = FetchPolicy(allow_http=True, allowed_networks=parse_networks(["127.0.0.1/32"]))
    artifacts = ArtifactService(
        SqliteStore(tmp_path / "gateway.db"),  # not opened: fetching keeps nothing
        LocalBlobStore(tmp_path / "blobs"),
        UrlSigner(b"s" * 32),
        ReferenceFetcher(policy if local else FetchPolicy()),
    )

    async def fetch(url: str, field: str) -> bytes:
        return await artifacts.fetch_document("tenant", url, field=field)

    return fetch


def _document(url: str) -> dict[str, Any]:
    return {"type": "document", "source": {"type": "url", "url": url}}


def _fetched(path: str, fetch: FetchDocument) -> dict[str, Any]:
    """A body with a URL document at `path` (and one in a tool result), after fetching."""

    async def main() -> dict[str, Any]:
        async with DocumentSite() as site:
            root = site.base_url
            inner = [_document(root + path)]
            result = {"type": "tool_result", "tool_use_id": "t1", "content": inner}
            content = [_document(root + path), result]
            raw = {"messages": [{"role": "user", "content": content}]}
            await fetch_url_documents(raw, fetch)
            return raw

    return asyncio.run(main())


def test_url_documents_are_fetched_and_sent_as_their_bytes_then_held_by_their_pages(
    tmp_path: Path,
) -> None:
    raw = _fetched("/3.pdf", _fetch(tmp_path))
    first, result = raw["messages"][0]["content"]
    base64_source = {
        "type": "base64",
        "media_type": "application/pdf",
        "data": base64.b64encode(PDF).decode(),
    }
    assert first["source"] == result["content"][0]["source"] == base64_source
    assert bound_messages(raw).pdf_pages == 6
    assert not [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()], "nothing is kept"


def test_a_url_the_reference_rules_refuse_is_a_422_naming_the_block(tmp_path: Path) -> None:
    with pytest.raises(ValidationFailed) as refused:
        _fetched("/3.pdf", _fetch(tmp_path, local=False))
    assert refused.value.details[0].field in (
        "messages[0].content[0].source.url",
        "messages[0].content[1].content[0].source.url",
    )


def test_what_is_not_a_pdf_is_refused_naming_the_block(tmp_path: Path) -> None:
    with pytest.raises(ValidationFailed, match="application/pdf") as refused:
        _fetched("/page.html", _fetch(tmp_path))
    assert refused.value.details[0].field.endswith("source.url")


def test_more_documents_by_url_than_the_limit_are_refused_before_any_fetch() -> None:
    blocks = [_document(f"https://a.example/{i}.pdf") for i in range(MAX_FETCHED + 1)]
    raw = {"messages": [{"role": "user", "content": blocks}]}
    fetched: list[str] = []

    async def fetch(url: str, field: str) -> bytes:
        fetched.append(url)
        return PDF

    with pytest.raises(InvalidRequest) as refused:
        asyncio.run(fetch_url_documents(raw, fetch))
    assert refused.value.details[0].field == f"messages[0].content[{MAX_FETCHED}].source.url"
    assert fetched == []
