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
checkpointing thread): the test runs alone on the machine. Every test takes its `turn`: a shared
lock for the others, the exclusive lock for it, on files every worker of the run sees. A gate
lock before the shared one lets the exclusive test in while others keep arriving: it waits only
for the tests already running. Exclusive tests are in the serial group and start it, so they
run while the other workers are on their first tests.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

__all__ = ["EXCLUSIVE_MARK", "LONG_GROUPS", "SERIAL", "STORE_FAULTS", "exclusive", "turn"]

SERIAL = pytest.mark.xdist_group("serial")
STORE_FAULTS = pytest.mark.xdist_group("store_faults")
LONG_GROUPS = frozenset({"serial", "store_faults"})
"""The groups that start the run (tests/conftest.py): each is minutes on one worker."""
EXCLUSIVE_MARK = "exclusive"

F = TypeVar("F", bound=Callable[..., object])


def exclusive(test: F) -> F:
    """The test runs alone: in the serial group, and with every other worker waiting."""
    marked: F = SERIAL(getattr(pytest.mark, EXCLUSIVE_MARK)(test))
    return marked


@contextlib.contextmanager
def turn(config: pytest.Config, *, alone: bool) -> Iterator[None]:
    """Hold the run's lock while a test runs: exclusive when `alone`, else shared. Without
    xdist workers there is nothing to wait for."""
    basetemp = config.getoption("basetemp", None)
    if not os.environ.get("PYTEST_XDIST_WORKER") or not basetemp:
        yield
        return
    folder = Path(basetemp).parent  # the run's folder, shared by its workers
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
