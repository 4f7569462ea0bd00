"""WAL checkpoints off the event loop.

SQLite's automatic checkpoint runs inside whichever COMMIT crosses the threshold and fsyncs the
database: measured here, one commit in a few hundred took 5-9 ms instead of ~0.1 ms, stalling
every request on the loop. So the store's own connection turns automatic checkpoints off and
this task checkpoints (PASSIVE: it never waits for readers or writers) from a worker thread
twice a second, when anything was written. Other processes keep their own checkpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

__all__ = ["Checkpointer"]

_INTERVAL_SECONDS = 0.5


class Checkpointer:
    """Checkpoints `path` while running; `written()` says how many writes happened so far."""

    def __init__(self, path: Path | str, written: Callable[[], int]) -> None:
        self._path = path
        self._written = written
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="sqlite-wal-checkpoint")

    async def stop(self) -> None:
        """Let a checkpoint in progress finish (its thread must not outlive the connection)."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            await task

    async def _run(self) -> None:
        # Used by one worker thread at a time, never concurrently: safe across threads.
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        done = self._written()
        try:
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_INTERVAL_SECONDS):
                        await self._stop.wait()
                written = self._written()
                if written != done:
                    await asyncio.to_thread(_checkpoint, conn)
                    done = written
        finally:
            conn.close()


def _checkpoint(conn: sqlite3.Connection) -> None:
    # A failed checkpoint loses nothing: the frames stay in the WAL for the next one.
    with contextlib.suppress(sqlite3.Error):
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
