"""Steady chat and image-task load over gateways while a Redis primary is killed, and what must
hold of its answers afterwards (the cluster and Sentinel failover tests).

Each request carries its own X-Request-Id, so every answer can be matched against the ledger:
every answer is a success or a retryable 503; nothing is charged behind a 503; every answered
chat is charged exactly once; every accepted task is debited once and ends; the wallet is the
sum of its ledger.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from tests.e2e.media_support import TERMINAL, assert_books_balance, ledger
from tests.support.gateway_process import GatewayProcess, client_for
from tests.support.waiting import wait_until

__all__ = ["Answer", "Load", "check_books"]

CHAT = {"model": "sim-chat-1", "messages": [{"role": "user", "content": "Hello"}]}
IMAGE = {"model": "image-model-2", "prompt": "a lighthouse", "n": 1}
_TASK_GAP_SECONDS = 0.2


@dataclass(frozen=True)
class Answer:
    request_id: str
    kind: str  # chat or task
    status: int
    body: dict[str, Any]


class Load:
    """Three chat loops and one task loop over the gateways, taking turns between them."""

    def __init__(self, gateways: list[GatewayProcess], key: str, name: str) -> None:
        self.clients = [client_for(g, key, timeout=60) for g in gateways]
        self.answers: list[Answer] = []
        self.stop = threading.Event()
        self._name = name
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._loop, args=(kind, n), daemon=True)
            for n, kind in enumerate(["chat", "chat", "chat", "task"])
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=90)
        for client in self.clients:
            client.close()

    def count(self) -> int:
        with self._lock:
            return len(self.answers)

    def wait_for(self, more: int, what: str) -> None:
        """Until `more` answers beyond the present count have come."""
        goal = self.count() + more
        wait_until(self.count, lambda n: n >= goal, timeout=90, what=what)

    def _loop(self, kind: str, n: int) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            request_id = f"{self._name}-{kind}-{n}-{i}"
            client = self.clients[i % len(self.clients)]
            path, body = (
                ("/v1/chat/completions", CHAT)
                if kind == "chat"
                else ("/v1/images/generations", IMAGE)
            )
            try:
                response = client.post(path, json=body, headers={"X-Request-Id": request_id})
            except httpx.TransportError as exc:  # the gateways never drop a call
                raise AssertionError(f"{request_id}: {exc!r}") from exc
            answer = Answer(request_id, kind, response.status_code, response.json())
            with self._lock:
                self.answers.append(answer)
            if response.status_code == 503:
                time.sleep(0.05)
            elif kind == "task":
                # Paced below what the workers run, so that every accepted task ends within the
                # check's wait however long the store keeps accepting them.
                time.sleep(_TASK_GAP_SECONDS)


def check_books(gateway: GatewayProcess, key: str, answers: list[Answer]) -> list[Answer]:
    """Every check of the module docstring; the retryable 503s answered."""
    refused = [x for x in answers if x.status == 503]
    other = [x for x in answers if x.status not in (200, 202, 503)]
    assert not other, other[:5]
    assert all(x.body["error"]["retryable"] for x in refused), refused[:5]

    with client_for(gateway, key) as client:
        chats = [x.request_id for x in answers if x.kind == "chat" and x.status == 200]
        tasks = [x.body["task_id"] for x in answers if x.kind == "task" and x.status == 202]

        def books() -> dict[str, list[dict[str, Any]]]:
            by_request: dict[str, list[dict[str, Any]]] = {}
            for entry in ledger(client):
                by_request.setdefault(entry.get("request_id") or "", []).append(entry)
            return by_request

        def settled(entries: dict[str, list[dict[str, Any]]]) -> bool:
            """Every answered chat charged (a settle queued in the window applies once the
            new primary has a replica again), and every accepted task ended."""
            if any(not entries.get(r) for r in chats):
                return False
            statuses = [client.get(f"/v1/tasks/{t}").json()["status"] for t in tasks]
            return all(s in TERMINAL for s in statuses)

        entries = wait_until(books, settled, timeout=120, what="every answer settled")
        for request_id in chats:  # charged exactly once
            assert [e["kind"] for e in entries[request_id]] == ["charge"], entries[request_id]
        for answer in refused:  # nothing charged behind a retryable failure
            assert answer.request_id not in entries, (answer, entries.get(answer.request_id))
        debits = [e for found in entries.values() for e in found if e["kind"] == "debit"]
        assert sorted(e["task_id"] for e in debits) == sorted(tasks)  # each once
        refunds = [
            e["task_id"] for found in entries.values() for e in found if e["kind"] == "refund"
        ]
        assert len(refunds) == len(set(refunds))
        assert_books_balance(client)
    return refused
