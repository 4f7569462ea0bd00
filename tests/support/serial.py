"""Tests that must not run beside others under pytest-xdist: `SERIAL`, `STORE_FAULTS` and
`exclusive`.

`SERIAL` marks tests that measure a process (its resident memory, how fast it answers while
attacked) or load the machine for long (the soak, a crowd of slow clients). With `--dist
loadgroup` (pyproject.toml) they all run on one worker, one after the other, so no two of them
ever overlap; the light tests run on the other workers meanwhile. `STORE_FAULTS` is the same for
the tests that pause, kill or fail over Redis servers of their own (several processes each, and
bounds on how fast the gateway answers meanwhile): one after the other on a worker of their own,
beside the `SERIAL` group, so neither group's length adds to the other's.

`exclusive` is for the few whose measure is CPU time against the clock (a writer racing a
checkpointing thread): the test runs alone on the machine, and before any other. Every test
takes its `turn`: a shared lock for the others, the exclusive lock for it, on files every worker
of the run sees. Exclusive tests are in the serial group and start it (tests/conftest.py), so
the worker that takes that group runs them first, once every worker has collected (five
workers collecting had shared the two cores with one); the other workers know from their
collection how many there are and start nothing until a file of the run lists them all as
ended. (Taken while others ran, the exclusive lock had waited for the longest test already
started: in one run an 11 s Redis Cluster failover, with four workers idle behind the gate.)
The gate lock before the shared one still keeps an exclusive test from waiting on arriving
ones.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

__all__ = [
    "EXCLUSIVE_MARK",
    "LONG_GROUPS",
    "SERIAL",
    "STORE_FAULTS",
    "count_exclusive",
    "exclusive",
    "turn",
]

SERIAL = pytest.mark.xdist_group("serial")
STORE_FAULTS = pytest.mark.xdist_group("store_faults")
LONG_GROUPS = frozenset({"serial", "store_faults"})
"""The groups that start the run (tests/conftest.py): each is minutes on one worker."""
EXCLUSIVE_MARK = "exclusive"
EXCLUSIVE_WAIT_SECONDS = 300.0
"""How long the other workers wait for the exclusive tests before they start anyway (a worker
that died in one never lists it as ended; its crash is reported on its own)."""
COLLECTION_WAIT_SECONDS = 60.0
"""How long an exclusive test waits for the other workers' collections (one that failed to
collect never says so; its error is reported on its own)."""

_EXCLUSIVE_TOTAL = pytest.StashKey[int]()
_EXCLUSIVE_OVER = pytest.StashKey[bool]()

F = TypeVar("F", bound=Callable[..., object])


def exclusive(test: F) -> F:
    """The test runs alone: in the serial group, and with every other worker waiting."""
    marked: F = SERIAL(getattr(pytest.mark, EXCLUSIVE_MARK)(test))
    return marked


def count_exclusive(session: pytest.Session) -> None:
    """Note how many exclusive tests this run has (the others start after them all), and that
    this worker has collected (they start after every worker has)."""
    config = session.config
    config.stash[_EXCLUSIVE_TOTAL] = sum(
        1 for item in session.items if item.get_closest_marker(EXCLUSIVE_MARK) is not None
    )
    folder = _run_folder(config)
    if folder is not None:
        with (folder / "workers.collected").open("a") as listing:
            listing.write(f"{os.environ['PYTEST_XDIST_WORKER']}\n")


def _run_folder(config: pytest.Config) -> Path | None:
    """The folder every worker of this run sees; None without xdist workers."""
    basetemp = config.getoption("basetemp", None)
    if not os.environ.get("PYTEST_XDIST_WORKER") or not basetemp:
        return None
    return Path(basetemp).parent


@contextlib.contextmanager
def turn(item: pytest.Item) -> Iterator[None]:
    """Hold the run's lock while a test runs: exclusive for an exclusive test, else shared,
    and only once the exclusive tests have ended. Without xdist workers there is nothing to
    wait for."""
    config = item.config
    folder = _run_folder(config)
    if folder is None:
        yield
        return
    ended = folder / "exclusive.ended"
    alone = item.get_closest_marker(EXCLUSIVE_MARK) is not None
    if alone:
        _wait_for_every_collection(folder / "workers.collected")
    else:
        _wait_for_the_exclusive_tests(config, ended)
    with (folder / "turn.gate").open("a") as gate, (folder / "turn.lock").open("a") as lock:
        try:
            if alone:
                fcntl.flock(gate, fcntl.LOCK_EX)  # no test starts from now on...
                fcntl.flock(lock, fcntl.LOCK_EX)  # ...and the running ones have ended
            else:
                fcntl.flock(gate, fcntl.LOCK_SH)
                fcntl.flock(lock, fcntl.LOCK_SH)
                fcntl.flock(gate, fcntl.LOCK_UN)
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
            if alone:
                with ended.open("a") as listing:  # one line per write: appends do not mix
                    listing.write(f"{item.nodeid}\n")


def _wait_for_the_exclusive_tests(config: pytest.Config, ended: Path) -> None:
    if config.stash.get(_EXCLUSIVE_OVER, False):
        return
    _wait_for_lines(ended, config.stash.get(_EXCLUSIVE_TOTAL, 0), EXCLUSIVE_WAIT_SECONDS)
    config.stash[_EXCLUSIVE_OVER] = True


def _wait_for_every_collection(collected: Path) -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    _wait_for_lines(collected, workers, COLLECTION_WAIT_SECONDS)


def _wait_for_lines(path: Path, count: int, seconds: float) -> None:
    """Until `path` has `count` lines (each a worker's or a test's word), or `seconds` passed:
    then the run goes on, and whatever kept the line from coming is reported on its own."""
    deadline = time.monotonic() + seconds
    while _lines(path) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def _lines(path: Path) -> int:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0
