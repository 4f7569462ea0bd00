"""Image creates without an Idempotency-Key on a busy gateway while Redis is paused (SIGSTOP).

Many clients keep creates in flight at once, so when Redis stops answering, creates are
buffered in its sockets: when it wakes up it runs every command it had received, also those the
gateway gave up on and answered 503 for. What must hold, matched by X-Request-Id against the
store itself once things settle: every 503 (retryable) left no task and no ledger entry; every
202 has its task and exactly one debit; the wallet equals its ledger and nothing stays held.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis

from gateway.store import store_from_url
from gateway.store.base import LedgerEntry, TaskRecord
from tests.e2e.media_support import root_of
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.redis_server import RedisServer
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until

pytestmark = STORE_FAULTS

CLIENTS = 32
STALL_SECONDS = 5.0
ANSWER_BOUND = 8.0
"""Every create is answered within this (the store's 2 s timeout, with a wide margin)."""


@dataclass
class Answer:
    request_id: str
    status: int
    body: str
    seconds: float


@pytest.fixture
def redis_server(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(redis_binary, tmp_path / "redis")
    server.workdir.mkdir()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def gateway(redis_server: RedisServer, tmp_path: Path) -> Iterator[tuple[GatewayProcess, str]]:
    env = {"GATEWAY_ARTIFACTS_DIR": str(tmp_path / "artifacts"), "GATEWAY_WORKERS": "0"}
    process = start_gateway(
        tmp_path / "gw", MEDIA_CONFIG, store_url=redis_server.url, extra_env=env
    )
    key = process.new_key("default")
    process.grant("default", "1000000")
    yield process, key
    process.stop()


async def _creates(base: str, key: str, stop: threading.Event, answers: list[Answer]) -> None:
    """`CLIENTS` clients, each sending one create after another until `stop`, each answer added
    to `answers`."""
    limits = httpx.Limits(max_connections=CLIENTS)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(
        base_url=base, headers=headers, limits=limits, timeout=30
    ) as client:

        async def one_client(number: int) -> None:
            sent = 0
            while not stop.is_set():
                request_id = f"stall-{number}-{sent}"
                sent += 1
                started = time.monotonic()
                body = {"model": "image-model-2", "prompt": f"a quay {request_id}"}
                response = await client.post(
                    "/v1/images/generations", json=body, headers={"X-Request-Id": request_id}
                )
                seconds = time.monotonic() - started
                answers.append(Answer(request_id, response.status_code, response.text, seconds))

        await asyncio.gather(*(one_client(n) for n in range(CLIENTS)))


def _created(answers: list[Answer], since: int = 0) -> int:
    """How many of the answers since the `since`-th were 202 (a task created)."""
    return sum(a.status == 202 for a in answers[since:])


def _books(store_url: str) -> tuple[list[TaskRecord], list[LedgerEntry], int, int]:
    """Every task and ledger entry of the tenant, its balance and what it holds."""

    async def read() -> tuple[list[TaskRecord], list[LedgerEntry], int, int]:
        store = store_from_url(store_url)
        await store.open()
        try:
            tasks: list[TaskRecord] = []
            after: str | None = None
            while True:
                page = await store.list_tasks("default", limit=100, after=after)
                tasks += page.tasks
                if not page.has_more:
                    break
                after = page.tasks[-1].task_id
            entries: list[LedgerEntry] = []
            entry_after: str | None = None
            while True:
                ledger = await store.ledger("default", limit=500, after=entry_after)
                entries += ledger.entries
                if not ledger.has_more:
                    break
                entry_after = ledger.entries[-1].id
            wallet = await store.wallet("default")
            return tasks, entries, wallet.balance_units, wallet.held_units
        finally:
            await store.close()

    return asyncio.run(read())


def test_a_503_create_leaves_no_task_and_no_charge(
    gateway: tuple[GatewayProcess, str], redis_server: RedisServer
) -> None:
    process, key = gateway
    stop = threading.Event()
    answers: list[Answer] = []
    load = threading.Thread(
        target=lambda: asyncio.run(_creates(root_of(process.base_url), key, stop, answers))
    )
    load.start()
    try:
        wait_until(lambda: _created(answers) >= CLIENTS, what="creates before the stall")
        redis_server.pause()
        try:
            time.sleep(STALL_SECONDS)  # the behaviour under test: the store answers nothing
        finally:
            redis_server.resume()
        after = len(answers)
        wait_until(lambda: _created(answers, after) >= CLIENTS, what="creates after the stall")
    finally:
        stop.set()
        load.join(timeout=60)
    assert not load.is_alive(), "a client hung behind the paused store"
    seen = answers

    # Settled: every create was confirmed or abandoned, which the finisher does within about
    # a second of the store's return.
    with redis.Redis.from_url(redis_server.url) as client:
        wait_until(
            lambda: {"unconfirmed": client.zcard("gw:tasks_unconfirmed")},
            lambda seen: seen["unconfirmed"] == 0,
            timeout=30,
            what="every create confirmed or abandoned",
        )

    statuses = {a.status for a in seen}
    assert statuses <= {202, 503}, [a for a in seen if a.status not in (202, 503)][:3]
    failed = [a for a in seen if a.status == 503]
    created = [a for a in seen if a.status == 202]
    assert failed, "no create failed while the store was paused: the test proved nothing"
    assert created, "no create succeeded around the stall"
    for answer in failed:
        assert '"retryable":true' in answer.body.replace(" ", ""), answer
        assert '"store_unavailable"' in answer.body, answer
    assert max(a.seconds for a in seen) < ANSWER_BOUND, max(seen, key=lambda a: a.seconds)

    tasks, entries, balance, held = _books(redis_server.url)
    task_by_request = {t.request_id: t for t in tasks}
    entries_by_request: dict[str, list[LedgerEntry]] = {}
    for entry in entries:
        if entry.request_id:
            entries_by_request.setdefault(entry.request_id, []).append(entry)

    ghosts = [a.request_id for a in failed if a.request_id in task_by_request]
    charged = [a.request_id for a in failed if a.request_id in entries_by_request]
    assert not ghosts, f"{len(ghosts)} of {len(failed)} creates answered 503 made tasks"
    assert not charged, f"{len(charged)} of {len(failed)} creates answered 503 were charged"
    for answer in created:
        task = task_by_request[answer.request_id]
        [debit] = entries_by_request[answer.request_id]
        assert (debit.kind, debit.task_id, debit.amount_units) == (
            "debit",
            task.task_id,
            -task.price_units,
        )
    assert len(tasks) == len(created)
    assert balance == sum(e.amount_units for e in entries)
    assert held == 0
