"""The supervisor of `serve --processes N` around its processes' lives: a SIGHUP while it stops
is not passed on (a process past its final pass would die of it), a replacement whose start-up
fails is retried with a growing pause while the others serve (only the first start is fatal),
and a fork that fails is retried too, the live processes and their metrics folder untouched.

The real `Supervisor` in a process of its own (`tests.support.scripted_supervisor`), forking
processes that follow a script of files the test writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway_process import ROOT
from tests.support.ports import free_port
from tests.support.waiting import wait_until


class Scripted:
    """The supervisor's process, its folder of scripted files and its log."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.log = folder / "supervisor.log"
        env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
        command = [sys.executable, "-m", "tests.support.scripted_supervisor"]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [*command, str(free_port()), str(folder)],
                env={**env, "PYTHONPATH": str(ROOT)},
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def events(self, name: str) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines()
        found = [json.loads(line) for line in lines if line.startswith("{")]
        return [line for line in found if line["event"] == name]

    def started(self) -> list[int]:
        return sorted(int(p.name.split("-")[1]) for p in self.folder.glob("started-*"))

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int:
        """SIGTERM, the processes' final passes let through; the supervisor's exit code."""
        self.signal(signal.SIGTERM)
        (self.folder / "go").touch()
        return self.process.wait(timeout=30)


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Scripted]:
    scripted = Scripted(tmp_path)
    try:
        wait_until(lambda: len(scripted.started()) == 2 or not scripted.running(), timeout=30)
        assert scripted.running(), scripted.log.read_text()
        yield scripted
    finally:
        if scripted.running():
            scripted.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_sighup_while_stopping_is_not_passed_on(supervisor: Scripted) -> None:
    pids = supervisor.started()
    supervisor.signal(signal.SIGHUP)  # while serving: a reload, passed to every process
    wait_until(lambda: all((supervisor.folder / f"reloaded-{p}").exists() for p in pids))
    supervisor.signal(signal.SIGTERM)
    wait_until(lambda: all((supervisor.folder / f"stopping-{p}").exists() for p in pids))
    supervisor.signal(signal.SIGHUP)  # the processes are past their final pass
    wait_until(
        lambda: (
            supervisor.events("processes_reload_skipped")
            or len(supervisor.events("processes_reload")) > 1
        )
    )
    assert supervisor.stop() == 0
    stopped = supervisor.events("process_stopped")
    assert sorted(line["process"] for line in stopped) == pids
    assert [line.get("exit_code") for line in stopped] == [0, 0], stopped  # none by SIGHUP


def test_a_replacement_that_cannot_start_is_retried_while_the_others_serve(
    supervisor: Scripted,
) -> None:
    first, second = supervisor.started()
    for n in (1, 2):
        (supervisor.folder / f"start-fails-{n}").touch()
    os.kill(first, signal.SIGKILL)
    wait_until(
        lambda: len(supervisor.started()) == 3 or supervisor.events("processes_stopping"),
        timeout=30,
    )
    assert not supervisor.events("processes_stopping"), supervisor.log.read_text()
    failed = supervisor.events("process_start_failed")
    assert [(line["level"], line["exit_code"]) for line in failed] == [("error", 3)] * 2
    assert [line["retry_in"] for line in failed] == [1.0, 2.0]  # a growing pause
    assert _alive(second)  # served throughout
    assert supervisor.stop() == 0


def test_a_failed_fork_is_retried_and_keeps_the_metrics_folder(supervisor: Scripted) -> None:
    first, second = supervisor.started()
    metrics = Path((supervisor.folder / "metrics-dir").read_text())
    (supervisor.folder / "fork-fails-1").touch()
    os.kill(first, signal.SIGKILL)
    wait_until(
        lambda: supervisor.events("process_fork_failed") or not supervisor.running(), timeout=30
    )
    assert supervisor.running(), supervisor.log.read_text()
    assert metrics.is_dir()  # the live processes' metrics stay where they write them
    assert _alive(second)
    wait_until(lambda: len(supervisor.started()) == 3, timeout=30)  # the fork, again
    assert supervisor.stop() == 0
    assert not metrics.exists()  # a private folder goes with the supervisor, after them
