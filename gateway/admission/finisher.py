"""Finishing admitted calls and task creates in the store, also when it stalls or goes away.

A store step whose reply never came (a timeout, a lost connection) may or may not have run, and
it may still run later (Redis executes a command it had buffered once it wakes up). Every
finishing step is idempotent (per call: the charge's ledger id is `charge:<call_id>`, the first
settle or release of a call takes its done marker; per task: `debit:<task_id>`, the task's
unconfirmed mark), so running one again is always safe, and running it again is how the
gateway learns the outcome. The same design serves every create-style operation:

- `settle` (a call that ran): tried until the store takes it, for up to `settle_wait` seconds
  while the client waits, so the answer goes out with its charge real. If the store is still
  away then, the result is answered all the same and the settlement stays queued: a call that
  produced a result is never answered as a retryable failure, since a retry would pay twice.
- `release` (a call that failed before costing anything): tried once, queued when the store
  does not take it. `abandon` queues a release for an admission whose outcome is unknown: the
  release also fences the call, so an admission that reaches the store after it takes nothing.
- `confirm` (a task create the store took, to be answered 202): tried once while the client
  waits, queued when the store does not take it; the task is answered all the same, since it
  exists and its confirmation is idempotent.
- `abandon` of a `TaskAbandon` (a task create whose outcome is unknown, or that failed after
  the store took it): queued; it removes the unconfirmed task and fences its id, so a create
  that reaches the store after it takes nothing. A create is only ever answered as a retryable
  failure before it was confirmed, so what the failure says is what the books show.

Queued steps are retried in the background (backoff from `retry_min` to `retry_max` while the
store is away), so holds, idempotency leases and token reservations come back within about
`retry_max` of the store's return, exactly once. Steps queue per part of the store that holds
their tenant (`Store.node_of`: a cluster master), each part retried by a runner of its own, so
a master that keeps failing holds back only its own tenants' steps. The queue is in memory and
bounded (`max_pending` over all parts): a crash of the process forgets it, which costs the
gateway the charge of calls already answered and leaves their holds to expire, never a double
charge.
"""

from __future__ import annotations

import asyncio
import contextlib

from gateway.clock import Clock, monotonic
from gateway.errors import StoreUnavailable
from gateway.logging import get_logger
from gateway.store.base import Release, Settlement, Store, TaskAbandon, TaskConfirm, TaskRecord

__all__ = ["CallFinisher"]

_log = get_logger("gateway.admission.finisher")

Step = Settlement | Release | TaskConfirm | TaskAbandon


class CallFinisher:
    """Settles and releases calls; owns the queue of steps the store has not taken yet."""

    def __init__(
        self,
        store: Store,
        *,
        settle_wait: float = 10.0,
        retry_min: float = 0.1,
        retry_max: float = 1.0,
        max_pending: int = 100_000,
        clock: Clock = monotonic,
    ) -> None:
        self._store = store
        self._settle_wait = settle_wait
        self._retry_min = retry_min
        self._retry_max = retry_max
        self._max_pending = max_pending
        self._clock = clock
        self._lanes: dict[str, _Lane] = {}
        self._where: dict[str, str] = {}
        """Every queued step's key -> its part of the store, oldest first (the bound's order)."""
        self._started = False

    @property
    def pending(self) -> int:
        """Steps waiting for the store (0 when every call is finished)."""
        return len(self._where)

    async def settle(self, settlement: Settlement) -> bool:
        """True once the store took the settlement; False when it was left queued."""
        try:
            return await self._settle(settlement)
        except asyncio.CancelledError:
            self._queue(settlement)  # it may or may not have run: make sure it does
            raise

    async def _settle(self, settlement: Settlement) -> bool:
        deadline: float | None = None
        delay = self._retry_min
        while True:
            try:
                await self._store.settle(settlement)
                return True
            except StoreUnavailable as exc:
                now = self._clock()
                if deadline is None:
                    deadline = now + self._settle_wait
                if now + delay >= deadline:
                    self._queue(settlement)
                    _log.warning(
                        "settle_deferred",
                        call_id=settlement.call.call_id,
                        error=repr(exc.__cause__),
                    )
                    return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._retry_max)

    async def release(self, release: Release) -> None:
        """Give back what the call took; queued when the store does not answer."""
        try:
            await self._store.release(release)
        except StoreUnavailable:
            self._queue(release)
        except asyncio.CancelledError:
            self._queue(release)
            raise
        except Exception as exc:  # the hold expires on its own; the caller's error matters more
            _log.error("release_failed", call_id=release.call.call_id, error=repr(exc))

    def abandon(self, step: Release | TaskAbandon) -> None:
        """An admission or a task create whose outcome is unknown: undo (and fence) it in the
        background."""
        self._queue(step)

    async def confirm(self, confirm: TaskConfirm) -> TaskRecord | None:
        """The task as confirmed; None when the store did not answer (then it stays queued) or
        the task is gone."""
        try:
            return await self._store.confirm_task(confirm)
        except StoreUnavailable as exc:
            self._queue(confirm)
            _log.warning("confirm_deferred", task_id=confirm.task_id, error=repr(exc.__cause__))
            return None
        except asyncio.CancelledError:
            self._queue(confirm)
            raise

    def _queue(self, step: Step) -> None:
        key, node = _key(step), self._store.node_of(_tenant(step))
        where = self._where
        previous = where.pop(key, None)
        if previous is not None and previous != node:
            self._lane(previous).steps.pop(key, None)
        where[key] = node
        lane = self._lane(node)
        lane.steps.pop(key, None)
        lane.steps[key] = step
        if len(where) > self._max_pending:
            dropped = next(iter(where))
            self._lane(where.pop(dropped)).steps.pop(dropped, None)
            _log.error("store_step_dropped", call_id=dropped, pending=len(where))
        lane.wakeup.set()
        if self._started and lane.runner is None:
            lane.runner = asyncio.get_running_loop().create_task(self._run(lane))

    def _lane(self, node: str) -> _Lane:
        lane = self._lanes.get(node)
        if lane is None:
            lane = self._lanes[node] = _Lane(node)
        return lane

    # Background retries -------------------------------------------------------------------

    def start(self) -> None:
        """Start retrying queued steps (on the running loop)."""
        if not self._started:
            self._started = True
            loop = asyncio.get_running_loop()
            for lane in self._lanes.values():
                lane.wakeup = asyncio.Event()
                if lane.steps:
                    lane.wakeup.set()
                lane.runner = loop.create_task(self._run(lane))

    async def close(self, *, final_wait: float = 2.0) -> None:
        """Stop retrying, after one last pass of at most `final_wait` seconds."""
        self._started = False
        runners = [lane.runner for lane in self._lanes.values() if lane.runner is not None]
        for lane in self._lanes.values():
            lane.runner = None
        for runner in runners:
            runner.cancel()
        for runner in runners:
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        if self._where:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(final_wait):
                    await self.retry_pending()
        if self._where:
            _log.error("store_steps_lost", pending=len(self._where))

    async def _run(self, lane: _Lane) -> None:
        while True:
            await lane.wakeup.wait()
            lane.wakeup.clear()
            delay = self._retry_min
            while not await self._retry_lane(lane):
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._retry_max)

    async def retry_pending(self) -> bool:
        """One pass over every part's queue at once; True when all are empty (False: some
        part of the store is still away)."""
        lanes = [lane for lane in self._lanes.values() if lane.steps]
        done = await asyncio.gather(*(self._retry_lane(lane) for lane in lanes))
        return all(done) and not self._where

    async def _retry_lane(self, lane: _Lane) -> bool:
        """One pass over one part's queue, in order, up to its first step the store did not
        take; True when it is empty."""
        for key, step in list(lane.steps.items()):
            try:
                await _apply(self._store, step)
            except StoreUnavailable:
                return False
            except Exception as exc:  # not the store being away: retrying will not help
                _log.error("store_step_dropped", call_id=key, error=repr(exc))
            if lane.steps.get(key) is step:
                del lane.steps[key]
                if self._where.get(key) == lane.node:
                    del self._where[key]
            _log.info("store_step_done", call_id=key, step=type(step).__name__.lower())
        return not lane.steps


class _Lane:
    """The queued steps of one part of the store, and the runner that retries them."""

    __slots__ = ("node", "runner", "steps", "wakeup")

    def __init__(self, node: str) -> None:
        self.node = node
        self.steps: dict[str, Step] = {}
        self.wakeup = asyncio.Event()
        self.runner: asyncio.Task[None] | None = None


def _tenant(step: Step) -> str:
    if isinstance(step, TaskConfirm | TaskAbandon):
        return step.tenant
    return step.call.tenant


def _key(step: Step) -> str:
    """What a queued step is about: one step per call or task is kept (the newest)."""
    if isinstance(step, TaskConfirm | TaskAbandon):
        return step.task_id
    return step.call.call_id


async def _apply(store: Store, step: Step) -> None:
    if isinstance(step, Settlement):
        await store.settle(step)
    elif isinstance(step, Release):
        await store.release(step)
    elif isinstance(step, TaskConfirm):
        await store.confirm_task(step)
    else:
        await store.abandon_task(step)
