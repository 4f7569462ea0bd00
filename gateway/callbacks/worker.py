"""The callback delivery worker: claims due deliveries from the store's schedule and attempts
them, `concurrency` at a time, at most `per_host` at once to one destination host.

It runs beside the task worker (in `gateway serve` and `gateway worker`), never on the request
path, and the task worker never waits on it: a task's end only schedules its callback, in the
store step that ends it. Each delivery is attempted under the lease its claim took (longer than
an attempt can last), and its outcome recorded under that lease: delivered (2xx), again later
on the retry schedule (anything else, honouring `Retry-After`), failed (after the last retry,
or at once when the host resolves to an address callbacks may not reach) or disabled (410). A
delivery whose destination already has `per_host` attempts under way waits here for one of
them to end, while its lease leaves time for a whole attempt (else it is left to its lease and
claimed again when that runs out), so a slow or dead receiver holds only its own share of the
worker and never delays other destinations.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from yarl import URL

from gateway.callbacks.schedule import STANDARD_WAITS, next_wait
from gateway.callbacks.sender import AttemptResult, CallbackSender
from gateway.callbacks.signing import signature_header
from gateway.errors import StoreUnavailable
from gateway.logging import get_logger
from gateway.metrics import DisabledMetrics, Metrics
from gateway.schemas.times import iso
from gateway.store.base import CallbackAttempt, CallbackStatus, Store, TaskRecord

__all__ = ["CallbackWorker", "Render", "event_body"]

_log = get_logger("gateway.callbacks")

Render = Callable[[TaskRecord], dict[str, Any]]
"""The task as `GET /v1/tasks/{id}` shows it (the composition root gives the API's view)."""


def event_body(task: TaskRecord, render: Render) -> bytes:
    """The delivery's body: `{type, timestamp, data}`, `data` the task as it read when it
    reached its terminal status (its callback then: pending, no attempt yet)."""
    assert task.callback is not None and task.completed_at is not None
    at_end = msgspec.structs.replace(
        task,
        callback=msgspec.structs.replace(
            task.callback,
            status="pending",
            attempt_count=0,
            delivered_at=None,
            last_error=None,
            next_attempt_at=task.completed_at,
            lease_token=None,
            lease_until=None,
            once=False,
        ),
    )
    event = {
        "type": f"task.{task.status}",
        "timestamp": iso(task.completed_at),
        "data": render(at_end),
    }
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


class CallbackWorker:
    def __init__(
        self,
        store: Store,
        sender: CallbackSender,
        render: Render,
        *,
        retry_waits: Sequence[float] = STANDARD_WAITS,
        concurrency: int = 16,
        per_host: int = 4,
        poll_seconds: float = 0.5,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._sender = sender
        self._render = render
        self._waits = tuple(retry_waits)
        self._concurrency = concurrency
        self._per_host = per_host
        self._poll = poll_seconds
        self._metrics = metrics or DisabledMetrics()
        self._hosts: dict[str, int] = {}
        self._waiting: dict[str, deque[tuple[TaskRecord, float]]] = {}
        """By host: claimed deliveries waiting for a slot, with when they must start by
        (`time.monotonic()`)."""
        self._running: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None

    @property
    def lease_seconds(self) -> float:
        """A claim's lease: longer than any attempt can last (so none overlaps another)."""
        return self._sender.longest_seconds + 60.0

    def use(self, sender: CallbackSender, render: Render, retry_waits: Sequence[float]) -> None:
        """A reloaded routing file: deliveries claimed from now on use these."""
        self._sender, self._render, self._waits = sender, render, tuple(retry_waits)

    def start(self) -> None:
        if self._loop_task is None and self._concurrency > 0:
            self._loop_task = asyncio.get_running_loop().create_task(self.run())

    async def close(self) -> None:
        """Stop; attempts under way stop too and are claimed again after their lease."""
        self._waiting.clear()
        tasks = [t for t in (self._loop_task, *self._running) if t is not None]
        self._loop_task = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def run(self) -> None:
        while True:
            waiting = sum(len(queue) for queue in self._waiting.values())
            free = self._concurrency - len(self._running) - waiting
            claimed: list[TaskRecord] = []
            if free > 0:
                try:
                    claimed = await self._store.claim_callbacks(
                        lease_seconds=self.lease_seconds, limit=free
                    )
                except StoreUnavailable:
                    pass
                except Exception as exc:
                    _log.error("callback_claim_failed", error=repr(exc))
            for task in claimed:
                self._begin(task)
            if len(claimed) < free or free <= 0:
                await asyncio.sleep(self._poll)

    def _begin(self, task: TaskRecord) -> None:
        assert task.callback is not None
        host = URL(task.callback.url).host or ""
        if self._hosts.get(host, 0) >= self._per_host:
            start_by = time.monotonic() + self.lease_seconds - self._sender.longest_seconds - 5
            self._waiting.setdefault(host, deque()).append((task, start_by))
            return
        self._start(host, task)

    def _start(self, host: str, task: TaskRecord) -> None:
        self._hosts[host] = self._hosts.get(host, 0) + 1
        job = asyncio.get_running_loop().create_task(self.deliver(task))
        self._running.add(job)
        job.add_done_callback(self._running.discard)
        job.add_done_callback(lambda _: self._leave(host))

    def _leave(self, host: str) -> None:
        left = self._hosts.get(host, 1) - 1
        if left > 0:
            self._hosts[host] = left
        else:
            self._hosts.pop(host, None)
        queue = self._waiting.get(host)
        while queue:
            task, start_by = queue.popleft()
            if time.monotonic() < start_by:  # else: its lease runs out, it is claimed again
                self._start(host, task)
                break
        if queue is not None and not queue:
            self._waiting.pop(host, None)

    async def deliver(self, task: TaskRecord) -> None:
        """One attempt of a claimed delivery, and its outcome recorded under its lease."""
        callback = task.callback
        assert callback is not None and callback.lease_token is not None
        try:
            keys = await self._store.callback_secrets(task.tenant)
            if keys is None:  # (made at the task's create; never absent in practice)
                result = AttemptResult("retry", "the tenant has no callback secret")
            else:
                body = event_body(task, self._render)
                now = time.time()
                stamp = int(now)
                headers = {
                    "webhook-id": callback.callback_id,
                    "webhook-timestamp": str(stamp),
                    "webhook-signature": signature_header(
                        keys, callback.callback_id, stamp, body, now
                    ),
                }
                result = await self._sender.send(callback.url, body, headers)
        except StoreUnavailable:
            return  # the lease runs out; the delivery is claimed again
        except Exception as exc:  # a fault of ours: the attempt counts, and is retried
            _log.error("callback_send_failed", task_id=task.task_id, error=repr(exc))
            result = AttemptResult("retry", "the gateway could not send it")
        status, wait = self._status(result, callback.attempt_count + 1)
        attempt = CallbackAttempt(
            tenant=task.tenant,
            task_id=task.task_id,
            lease_token=callback.lease_token,
            status=status,
            next_attempt_at=time.time() + wait if wait is not None else None,
            last_error=result.error,
        )
        try:
            recorded = await self._store.record_callback_attempt(attempt)
        except StoreUnavailable:
            _log.warning("callback_record_failed", task_id=task.task_id)
            return
        shown = recorded.callback.status if recorded and recorded.callback else status
        self._metrics.callback_attempt(shown)
        _log.info(
            "callback_attempt",
            task_id=task.task_id,
            callback_id=callback.callback_id,
            attempt=callback.attempt_count + 1,
            outcome=shown,
            error=result.error,
        )

    def _status(self, result: AttemptResult, attempts: int) -> tuple[CallbackStatus, float | None]:
        if result.outcome == "delivered":
            return "delivered", None
        if result.outcome == "gone":
            return "disabled", None
        if result.outcome == "refused":
            return "failed", None
        wait = next_wait(attempts, self._waits, result.retry_after)
        return ("retrying", wait) if wait is not None else ("failed", None)
