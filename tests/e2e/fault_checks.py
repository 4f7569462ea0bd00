"""The checks every fault test ends with, once the fault is over and things have settled.

- every task of every tenant is terminal (listed by the API, so a task whose create answer
  the client never got is found too);
- each tenant's wallet equals the sum of its ledger, entry by entry;
- nothing is held (holds of calls that died are released or have expired);
- no partial artifact: every artifact record in the store has its blob, of the recorded size
  and digest, and its bytes are served whole;
- `/v1/health` answers 200 (from the process that lived through the fault), within 10 s;
- a client's failed call ended in time and, when it got an answer at all, that answer was the
  error envelope saying retryable (`assert_retryable`).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from gateway.artifacts.blobs import LocalBlobStore
from gateway.store import ArtifactRecord, store_from_url
from tests.e2e.media_support import TERMINAL, assert_books_balance, root_of
from tests.support.waiting import wait_until

__all__ = ["Books", "Failure", "all_tasks", "artifact_records", "assert_retryable", "check_all"]


@dataclass
class Failure:
    """What a client saw of a call that did not succeed: a status (-1: no answer) and text."""

    what: str
    status: int
    text: str
    seconds: float


def assert_retryable(failures: Iterable[Failure], *, within: float) -> None:
    """Each failed call ended within `within` seconds; an answered one is a retryable envelope
    (a stream that had begun ends with an error event that is one)."""
    for failure in failures:
        assert failure.seconds < within, f"{failure.what} hung {failure.seconds:.1f}s"
        if failure.status == -1:
            continue  # no answer at all: the connection broke (a killed process)
        assert '"retryable":true' in failure.text.replace(" ", ""), (
            f"{failure.what}: {failure.status} {failure.text[-300:]}"
        )


@dataclass
class Books:
    """A tenant's API key, to check its wallet and tasks."""

    tenant: str
    key: str


def _client(base_url: str, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=root_of(base_url), headers={"Authorization": f"Bearer {key}"}, timeout=15
    )


def all_tasks(client: httpx.Client) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        params = {"limit": "100", **({"after": after} if after else {})}
        response = client.get("/v1/tasks", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        tasks += page["data"]
        if not page["has_more"]:
            return tasks
        after = page["next_after"]


def artifact_records(store_url: str) -> list[ArtifactRecord]:
    """Every artifact record in the store, read with the gateway's own store code."""

    async def read() -> list[ArtifactRecord]:
        store = store_from_url(store_url)
        await store.open()
        try:
            return await store.expired_artifacts(1e12, 1_000_000)
        finally:
            await store.close()

    return asyncio.run(read())


def _check_artifacts(base_url: str, books: list[Books], store_url: str, blobs: Path) -> None:
    local = LocalBlobStore(blobs)
    clients = {b.tenant: _client(base_url, b.key) for b in books}
    try:
        for record in artifact_records(store_url):
            path = local.path_for(record.blob_key)
            assert path.is_file(), f"artifact {record.artifact_id} has no bytes"
            data = path.read_bytes()
            assert len(data) == record.size_bytes, f"{record.artifact_id}: short blob"
            assert hashlib.sha256(data).hexdigest() == record.sha256, record.artifact_id
            client = clients.get(record.tenant)
            if client is None:
                continue
            served = client.get(f"/v1/artifacts/{record.artifact_id}/content")
            assert served.status_code == 200, served.text
            assert served.content == data, f"{record.artifact_id} served short"
    finally:
        for client in clients.values():
            client.close()


def check_all(
    base_url: str,
    books: list[Books],
    *,
    store_url: str,
    blobs: Path,
    settle_seconds: float = 30.0,
) -> None:
    """The common end of every fault test (see the module docstring)."""
    # Health pings the store with a 250 ms deadline: on a machine held to a fraction of a core
    # one ping outlasted it right after a fault test's load, so a degraded answer may come and
    # go; one that stays is the defect.
    wait_until(
        lambda: httpx.get(f"{base_url}/health", timeout=5).status_code,
        lambda status: status == 200,
        timeout=10,
        what="/v1/health to answer 200",
    )
    deadline = time.monotonic() + settle_seconds
    for book in books:
        with _client(base_url, book.key) as client:
            tasks = wait_until(
                lambda: all_tasks(client),
                lambda now: _settled(client, now),
                timeout=max(deadline - time.monotonic(), 0.0),
                interval=0.2,
                what=f"{book.tenant}: every task terminal and nothing held",
            )
            assert_books_balance(client)
            for task in tasks:
                if task["status"] != "succeeded":
                    billing = task["billing"]
                    assert billing["refunded_credits"] == billing["charged_credits"], task
    _check_artifacts(base_url, books, store_url, blobs)


def _settled(client: httpx.Client, tasks: list[dict[str, Any]]) -> bool:
    """Every task terminal and nothing held."""
    if any(t["status"] not in TERMINAL for t in tasks):
        return False
    return Decimal(client.get("/v1/wallet").json()["held_credits"]) == 0
