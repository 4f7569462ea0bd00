"""Write bodies queued during one turn of the event loop, committed in one transaction.

A settlement's own statements take tens of microseconds; its `COMMIT` as much again, plus the
pages it writes to the WAL. Under load several calls settle in the same turn of the loop, so
their bodies are queued (`submit`) and run together when the turn ends: one `BEGIN
IMMEDIATE`, each body in a savepoint of its own, one `COMMIT`. A body that raises is rolled
back to its savepoint and raises to its own caller; the others commit. A transaction that
cannot begin or commit (the file locked past the busy timeout, a full disk) fails every body
in it and commits none, as each alone would have. A caller cancelled before its turn came is
left out (as if cancelled before its write). Bodies run in the order they came, so each sees
the ones before it (a balance after a charge is exact).

A body's `committed` step runs in the flush itself, right after the `COMMIT`, before anything
else on the loop: what a settlement lets go of in memory (its hold) goes in the same step as
its charge lands in the file. Left to the caller, it would run only once the caller's task
resumed, later in the loop, and whatever ran in between (admissions) would count both the
charge and the hold; a caller cancelled in between would never let go at all.

The flush waits while the WAL is rewound (`writable` cleared), like any write.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from gateway.store.sqlite.errors import store_errors

__all__ = ["Coalescer"]

_T = TypeVar("_T")

Body = Callable[[sqlite3.Connection, float], Any]
Committed = Callable[[], None]


class Coalescer:
    """Runs `submit`ted bodies at the end of the loop's turn, in one transaction.

    `transaction(run)` is the store's: it opens the IMMEDIATE transaction, calls `run(conn,
    now, count)` inside it and commits; `writable` is the store's WAL gate."""

    def __init__(
        self,
        transaction: Callable[[Callable[[sqlite3.Connection, float], None], int], None],
        writable: Callable[[], asyncio.Event | None],
    ) -> None:
        self._transaction = transaction
        self._writable = writable
        self._queued: list[tuple[Body, Committed | None, asyncio.Future[Any]]] = []
        self._waiting: asyncio.Task[None] | None = None

    def submit(
        self,
        body: Callable[[sqlite3.Connection, float], _T],
        committed: Committed | None = None,
    ) -> asyncio.Future[_T]:
        """`body(conn, now)`'s result once its transaction committed (await it); `committed()`
        runs right after that commit, before anything else on the loop, and only if the body
        succeeded and its transaction committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        if not self._queued and self._waiting is None:
            loop.call_soon(self._flush_when_writable)
        self._queued.append((body, committed, future))
        return future

    def flush(self) -> None:
        """Run what is queued now (the store closing)."""
        queued, self._queued = self._queued, []
        live = [entry for entry in queued if not entry[2].done()]
        if not live:
            return
        outcomes: list[tuple[bool, Any]] = []

        def run(conn: sqlite3.Connection, now: float) -> None:
            for body, _, _ in live:
                conn.execute("SAVEPOINT settle")
                try:
                    with store_errors:
                        outcomes.append((True, body(conn, now)))
                    conn.execute("RELEASE settle")
                except Exception as exc:
                    conn.execute("ROLLBACK TO settle")
                    conn.execute("RELEASE settle")
                    outcomes.append((False, exc))

        try:
            self._transaction(run, len(live))
        except BaseException as exc:
            for _, _, future in live:
                future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, committed, future), (ok, value) in zip(live, outcomes, strict=True):
            if not ok:
                future.set_exception(value)
                continue
            if committed is not None:
                try:
                    committed()
                except Exception as exc:
                    future.set_exception(exc)
                    continue
            future.set_result(value)

    def _flush_when_writable(self) -> None:
        writable = self._writable()
        if writable is None or writable.is_set():
            self.flush()
        elif self._waiting is None:
            self._waiting = asyncio.get_running_loop().create_task(self._wait_then_flush(writable))

    async def _wait_then_flush(self, writable: asyncio.Event) -> None:
        try:
            await writable.wait()
        finally:
            self._waiting = None
        self._flush_when_writable()
