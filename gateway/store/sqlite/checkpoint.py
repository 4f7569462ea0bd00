"""WAL checkpoints off the event loop, and a WAL that stays bounded under continuous load.

SQLite's automatic checkpoint runs inside whichever COMMIT crosses the threshold and fsyncs the
database: measured here, one commit in a few hundred took 5-9 ms instead of ~0.1 ms, stalling
every request on the loop. So the store's connection turns automatic checkpoints off and this
task checkpoints from a worker thread, on its own connection.

Four things shape it, all measured on this project's machines:

- A PASSIVE checkpoint never blocks the loop's writes, but it never catches up while they keep
  coming either, and SQLite only rewinds the WAL after a checkpoint that did: under sustained
  load the file grew ~50 KB per request without end (1.6-2.2 GB in 15 minutes) and every read
  got slower as the WAL index grew. So once the WAL holds `restart_bytes`, PASSIVE (which
  copies nearly everything without blocking) is followed by RESTART: it takes the write lock
  for the few frames left and an fsync, and the next commit writes from the start of the file
  again (`journal_size_limit`, set to the same size, trims a file that grew past it).
- Left to SQLite's busy handler, that write lock was often won only after 30-175 ms of polling
  against the loop's back-to-back transactions, while the WAL kept growing. So the store's
  writers wait for `writable` (an asyncio event: the loop keeps serving everything else,
  admissions included, as they only read) while RESTART runs, and the lock is free at once:
  writes wait ~3 ms, once per `restart_bytes` written. (TRUNCATE instead of RESTART took
  ~17 ms, and appending to a file truncated to zero made every commit slower.)
- A checkpoint's fsync can stall for 100-300 ms when other writers share the disk (seen beside
  the test suite's other processes and beside a `dd` with fsync), and a fast loop wrote ~200 MB/s
  meanwhile: the WAL grew to 46-67 MB against a 512 KiB `restart_bytes`. So the WAL has a hard
  bound too: once it holds `hold_bytes`, writers wait while a checkpoint is running, and the
  RESTART that follows sets them free. Only a slow disk under a fast writer meets it.
- Each checkpoint's fsync stalls the loop's WAL appends for 1-3 ms. So checkpoints happen only
  when there is enough to copy (`passive_bytes`), or something is left and `max_age` passed
  (a power loss, not a crash, can lose commits not yet checkpointed under synchronous=NORMAL:
  this bounds that window), not on every tick.

How much is in the WAL comes from the wal-index header at the start of the -shm file
(mxFrame, nBackfill; https://www.sqlite.org/walformat.html, section 2.2), read every `interval`
seconds; the file's size would not tell, as a rewound WAL keeps its size. Other processes
(the CLI) keep SQLite's automatic checkpoints on their own connections.

The header is read through one descriptor kept open until every connection of the store is
closed (`release`). Closing any descriptor of a file drops every POSIX lock the process holds
on it (https://www.sqlite.org/howtocorrupt.html, 2.2), SQLite's locks on the -shm among them.
Opened and closed at each read, as it once was, it dropped them ten times a second: a `gateway`
command opening the database then found no other connection, reset the -shm that the server had
mapped, and the server died of SIGBUS on its next read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import struct
import time
from pathlib import Path

import msgspec

__all__ = ["Checkpointer", "WalLimits"]

_HEADER = struct.Struct("=16xI76xI")  # mxFrame at byte 16, nBackfill at byte 96, native order
_CATCH_UP_ROUNDS = 3
_RESTART_TAIL_BYTES = 1 << 20


class WalLimits(msgspec.Struct, kw_only=True, frozen=True):
    """When the checkpoint task acts (see the module docstring)."""

    interval: float = 0.1
    """How often the WAL header is read (~10 µs on the loop); the thresholds decide the rest."""
    passive_bytes: int = 32 << 20
    restart_bytes: int = 64 << 20
    hold_bytes: int = 256 << 20
    """Past this, writers wait for the checkpoint in progress and the RESTART after it (a WAL
    that grows while a stalled disk holds the checkpointer, see the module docstring)."""
    max_age: float = 2.0
    busy_timeout_ms: int = 200
    """How long RESTART waits for another process's lock before it gives up for this round."""


class Checkpointer:
    """Checkpoints `path` while running; writers of the store wait for `writable`."""

    def __init__(
        self, path: Path | str, writable: asyncio.Event, limits: WalLimits | None = None
    ) -> None:
        self._path = path
        self._shm = f"{path}-shm"
        self._shm_fd: int | None = None
        self._writable = writable
        self._limits = limits or WalLimits()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.restarts = 0
        """How many times the WAL was rewound (for tests and benchmarks)."""
        self.holds = 0
        """How many times writers waited because the WAL held `hold_bytes`."""
        self.longest_pause = 0.0
        """The longest time writers waited for a RESTART, in seconds (a hold included)."""
        self._held_at: float | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="sqlite-wal-checkpoint")

    async def stop(self) -> None:
        """Let a checkpoint in progress finish (its thread must not outlive the connection)."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            await task

    def release(self) -> None:
        """Close the -shm descriptor: only once the store's connections are closed, as closing
        it drops the process's locks on the file (see the module docstring)."""
        fd, self._shm_fd = self._shm_fd, None
        if fd is not None:
            os.close(fd)

    async def _run(self) -> None:
        limits = self._limits
        # Used by one worker thread at a time, never concurrently: safe across threads.
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(limits.busy_timeout_ms)}")
            frame_bytes = _frame_bytes(conn)
            done_at = time.monotonic()
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(limits.interval):
                        await self._stop.wait()
                frames, copied = self._frames()
                if frames <= copied:
                    continue  # nothing new (SQLite itself rewinds a WAL copied to its end)
                try:
                    if frames * frame_bytes >= limits.hold_bytes:
                        self._hold(full=True)
                        await self._restart(conn)
                    elif (
                        frames * frame_bytes >= limits.restart_bytes
                        or (frames - copied) * frame_bytes >= limits.passive_bytes
                        or time.monotonic() - done_at >= limits.max_age
                    ):
                        logged = await self._passive(conn, frame_bytes)
                        if logged * frame_bytes >= limits.restart_bytes or self._holding:
                            await self._catch_up(conn, frame_bytes)
                            await self._restart(conn)
                        done_at = time.monotonic()
                finally:
                    self._release()
        finally:
            conn.close()

    async def _catch_up(self, conn: sqlite3.Connection, frame_bytes: int) -> None:
        """More PASSIVE rounds while writes go on, so that RESTART, which holds them, has
        little left to copy (a 64 MiB round lets tens of MiB in on a busy loop)."""
        for _ in range(_CATCH_UP_ROUNDS):
            frames, copied = self._frames()
            if self._holding or (frames - copied) * frame_bytes <= _RESTART_TAIL_BYTES:
                return  # writers held already: RESTART copies the rest as fast
            await self._passive(conn, frame_bytes)

    async def _restart(self, conn: sqlite3.Connection) -> None:
        # Runs on the loop, so no write transaction of the store is open right now; the ones
        # that come next wait for `writable` instead of fighting over the lock.
        self._hold()
        if await asyncio.to_thread(_checkpoint, conn, "RESTART") >= 0:
            self.restarts += 1
        self._release()

    async def _passive(self, conn: sqlite3.Connection, frame_bytes: int) -> int:
        """A PASSIVE checkpoint in a worker thread while the loop watches the WAL: writers are
        held once it holds `hold_bytes` (and set free by the RESTART that must follow)."""
        job = asyncio.ensure_future(asyncio.to_thread(_checkpoint, conn, "PASSIVE"))
        while not job.done():
            await asyncio.wait((job,), timeout=self._limits.interval)
            if not job.done() and not self._holding:
                frames, _ = self._frames()
                if frames * frame_bytes >= self._limits.hold_bytes:
                    self._hold(full=True)
        return job.result()

    @property
    def _holding(self) -> bool:
        return self._held_at is not None

    def _hold(self, *, full: bool = False) -> None:
        """Writers wait from now on (a write transaction in progress ends first: it runs on
        the loop, and so does this); `full` when the WAL holds `hold_bytes`."""
        if self._held_at is None:
            self._held_at = time.monotonic()
            self._writable.clear()
            if full:
                self.holds += 1

    def _release(self) -> None:
        held_at, self._held_at = self._held_at, None
        if held_at is not None:
            self._writable.set()
            self.longest_pause = max(self.longest_pause, time.monotonic() - held_at)

    def _frames(self) -> tuple[int, int]:
        """(frames in the WAL, frames already copied); (1, 0) when the header is unreadable,
        so that `max_age` still triggers checkpoints and their results drive the restarts."""
        try:
            if self._shm_fd is None:
                self._shm_fd = os.open(self._shm, os.O_RDONLY | os.O_CLOEXEC)
            frames, copied = _HEADER.unpack(os.pread(self._shm_fd, _HEADER.size, 0))
        except (OSError, struct.error):
            return 1, 0
        return int(frames), int(copied)


def _frame_bytes(conn: sqlite3.Connection) -> int:
    """A WAL frame is a page plus a 24-byte header (the default page when the file is busy:
    this task must not die, or the WAL would grow without end)."""
    try:
        page_size: int = conn.execute("PRAGMA page_size").fetchone()[0]
    except sqlite3.Error:
        page_size = 4096
    return page_size + 24


def _checkpoint(conn: sqlite3.Connection, mode: str) -> int:
    """Frames in the WAL before the checkpoint; -1 when it did not complete.

    A failed or busy checkpoint loses nothing: the frames stay in the WAL for the next one.
    """
    with contextlib.suppress(sqlite3.Error):
        busy, logged, _ = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        return -1 if busy else int(logged)
    return -1
