"""`python -m tests.support.scripted_supervisor PORT DIR`: the real supervisor of `serve
--processes 2` (with its private metrics folder), whose processes follow a script the test
writes as files in DIR, for the tests of what the supervisor does around them
(tests/app/test_supervisor.py). Its exit code is the supervisor's; its log goes to stdout.

A process, as a serving one does: a start-up that fails (exit 3) while a `start-fails-*` file
is left to take; else it writes `started-<pid>`, answers SIGHUP (a reload: `reloaded-<pid>`)
until SIGTERM, then, as its loop's signal handlers are removed (SIGHUP back to its default,
which ends a process), makes its final pass: `stopping-<pid>`, then waits for `go` and exits 0.
A fork fails (EAGAIN, as when the process limit is reached) while a `fork-fails-*` file is
left to take. `metrics-dir` holds the metrics folder's path.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType

from gateway.app.processes import STARTUP_FAILED, MetricsFolder, Supervisor, listen_shared
from gateway.app.settings import Settings
from gateway.config.loader import GatewayConfig, load_config
from gateway.logging import configure_logging

__all__ = ["main"]

_fork = os.fork


def _take(folder: Path, prefix: str) -> bool:
    """Takes one `prefix*` file (removes it); False when none is left."""
    for path in sorted(folder.glob(f"{prefix}*")):
        try:
            path.unlink()
        except FileNotFoundError:  # another process took it first
            continue
        return True
    return False


def _process(folder: Path) -> int:
    if _take(folder, "start-fails-"):
        return STARTUP_FAILED
    pid = os.getpid()
    stopping: list[int] = []

    def on_term(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    def on_hup(signum: int, frame: FrameType | None) -> None:
        (folder / f"reloaded-{pid}").touch()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_hup)
    (folder / f"started-{pid}").touch()
    while not stopping:
        time.sleep(0.02)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    (folder / f"stopping-{pid}").touch()
    while not (folder / "go").exists():
        time.sleep(0.02)
    return 0


def main(port: int, folder: Path) -> int:
    metrics = MetricsFolder.prepare()
    (folder / "metrics-dir").write_text(metrics.path)

    def fork() -> int:
        if _take(folder, "fork-fails-"):
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        return _fork()

    os.fork = fork
    settings = Settings(port=port, processes=2)
    configure_logging("info")
    sockets = listen_shared(settings.host, port, settings.processes)
    config = load_config(settings.config_path)

    def serve_one(settings: Settings, config: GatewayConfig, sock: socket.socket) -> int:
        return _process(folder)

    return Supervisor(settings, config, sockets, serve_one, metrics).run()


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), Path(sys.argv[2])))
