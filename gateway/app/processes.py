"""`gateway serve --processes N`: N serving processes on one port under one supervisor.

The port: the supervisor binds N listening sockets with SO_REUSEPORT (after a plain bind has
shown that nothing else listens there) and keeps them; serving process i gets socket i by fork.
The kernel spreads new connections over the sockets by a hash of their addresses, so long-lived
connections (a load balancer's, an SDK's pool) spread as well as short ones. With one shared
socket, whichever process wakes first takes a whole burst of connections: 16 wrk connections
split 0/100 in two runs of five (docs/performance.md). A socket stays open in the supervisor
while its process is replaced, so connections hashed to it wait for the replacement instead of
being refused.

Each serving process is the one-process server (`serve.run_server`): the bounded HTTP protocol,
uvloop, `gc.freeze` after start, one JSON log line per request (with a `pid` field), its own
store connections, breakers and routing-file watcher. The supervisor runs no event loop and
holds no connection; it forks the processes, then waits for signals and for them:

- SIGTERM or SIGINT: it closes its copies of the sockets and sends SIGTERM to every process;
  each drains what it serves, as one process does. It exits 0 once all are gone. A second
  SIGTERM or SIGINT sends SIGINT: they stop without waiting for their connections.
- SIGHUP: passed to every process, which reloads the routing file. A process that starts later
  (a replacement) reads the file again as it starts, so it serves what the others serve. While
  stopping, nothing is passed on (`processes_reload_skipped`): a process past its final pass
  has no handler left, and SIGHUP would end it mid-drain.
- A process that dies (killed, crashed, out of memory) is logged (`process_exited`, level
  error) and replaced, at most once a second per slot; its live metrics are marked dead. A
  first process that could not start (its start-up failed: exit 3) stops the gateway with exit
  1, since the others would fail the same way. A replacement that could not start (a store or
  S3 check that failed for a moment) is retried after a pause that doubles from 1 s to 30 s
  (`process_start_failed` with `retry_in`) while the others serve; so is a fork that failed
  (`process_fork_failed`; at the first start, it stops the gateway).
- If the supervisor itself is killed, the processes get SIGTERM (Linux's parent-death signal)
  and drain, so none is left holding the port.

Metrics: every process writes its values to `PROMETHEUS_MULTIPROC_DIR` (a private folder made
here and removed at exit when none is set), so any process's `/metrics` shows them all
(`gateway.metrics.process_facts`). Task workers: `GATEWAY_WORKERS` is the total, split between
the processes (4 over 3: 2, 1, 1; 1 over 2: the first process only).
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import FrameType
from typing import NoReturn

from gateway.app.settings import Settings
from gateway.config.loader import ConfigError, GatewayConfig, load_config
from gateway.logging import get_logger, name_the_process

__all__ = [
    "STARTUP_FAILED",
    "MetricsFolder",
    "Supervisor",
    "listen_shared",
    "worker_shares",
]

STARTUP_FAILED = 3
"""A serving process's exit code when its start-up failed (uvicorn's own)."""

_RESTART_SECONDS = 1.0
_RETRY_MAX_SECONDS = 30.0
_PR_SET_PDEATHSIG = 1
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)

ServeOne = Callable[[Settings, GatewayConfig, socket.socket], int]
"""Runs one server on a listening socket until it is told to stop; its exit code."""

_log = get_logger("gateway.processes")


def worker_shares(workers: int, processes: int) -> list[int]:
    """GATEWAY_WORKERS split between the processes, the first ones taking the remainder."""
    return [workers // processes + (1 if i < workers % processes else 0) for i in range(processes)]


def listen_shared(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one port (SO_REUSEPORT), or OSError when anything else
    listens there: a plain bind first, which fails beside any listener, so that a second
    gateway does not join this one's sockets."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            sock.listen(2048)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class MetricsFolder:
    """The processes' `PROMETHEUS_MULTIPROC_DIR`: the operator's, or a private one that is
    removed at exit. It must be in the environment before prometheus-client is imported (the
    library reads it then), so `prepare` runs before anything loads the metrics."""

    def __init__(self, path: str, *, private: bool) -> None:
        self.path = path
        self.private = private

    @classmethod
    def prepare(cls) -> MetricsFolder:
        """ValueError (naming the variable) when the operator's folder cannot be used."""
        given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if given:
            if not os.path.isdir(given) or not os.access(given, os.W_OK | os.X_OK):
                raise ValueError(f"PROMETHEUS_MULTIPROC_DIR: {given} is not a writable folder")
            return cls(given, private=False)
        if "prometheus_client" in sys.modules:  # a mistake of ours, not the operator's
            raise RuntimeError("prometheus_client was imported before the metrics folder was set")
        path = tempfile.mkdtemp(prefix="gateway-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
        return cls(path, private=True)

    def mark_dead(self, pid: int) -> None:
        """A process ended: its live gauges leave the scrape (its counters stay summed)."""
        from prometheus_client.multiprocess import mark_process_dead  # loaded after `prepare`

        with contextlib.suppress(OSError):
            mark_process_dead(pid, self.path)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        if self.private:
            shutil.rmtree(self.path, ignore_errors=True)


@dataclass(slots=True)
class _Slot:
    index: int
    sock: socket.socket
    workers: int
    pid: int = 0
    started: float = 0.0
    restart_at: float | None = None
    replacement: bool = False
    """Its first process has started: a failure to start now is retried, not fatal."""
    failures: int = 0
    """Replacements in a row that could not start (or be forked): the next pause doubles."""

    def retry_later(self) -> float:
        """Schedules the next try, after a pause that doubles with each failure; the pause."""
        self.failures += 1
        pause: float = min(_RESTART_SECONDS * 2.0 ** (self.failures - 1), _RETRY_MAX_SECONDS)
        self.restart_at = time.monotonic() + pause
        return pause


class Supervisor:
    """Forks a serving process per socket and keeps them running until told to stop."""

    def __init__(
        self,
        settings: Settings,
        config: GatewayConfig,
        sockets: list[socket.socket],
        serve_one: ServeOne,
        metrics: MetricsFolder | None,
    ) -> None:
        shares = worker_shares(settings.workers, len(sockets))
        self._slots = [_Slot(i, sock, shares[i]) for i, sock in enumerate(sockets)]
        self._settings = settings
        self._config = config
        self._serve_one = serve_one
        self._metrics = metrics
        self._signals: list[int] = []
        self._stopping = False
        self._forced = False
        self._exit_code = 0
        self._wake_read, self._wake_write = os.pipe()

    def run(self) -> int:
        """Serves until SIGTERM or SIGINT, then waits for every process; the exit code."""
        for fd in (self._wake_read, self._wake_write):
            os.set_blocking(fd, False)
        previous = {signum: signal.signal(signum, self._on_signal) for signum in _FORWARDED}
        previous_wakeup = signal.set_wakeup_fd(self._wake_write)
        name_the_process(True)
        try:
            for slot in self._slots:
                if not self._stopping:  # (a fork that failed at the first start stops it)
                    self._start(slot)
            while not self._stopping or any(slot.pid for slot in self._slots):
                self._wait()
                self._handle_signals()
                self._reap()
                self._restart_due()
        finally:
            signal.set_wakeup_fd(previous_wakeup)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            for fd in (self._wake_read, self._wake_write):
                os.close(fd)
            self._close_sockets()
            if self._metrics is not None:
                if self._live_pids():  # (a fault of ours): never pull it from under them
                    _log.error("metrics_folder_kept", path=self._metrics.path)
                else:
                    self._metrics.close()
        return self._exit_code

    # The supervisor's loop.

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals.append(signum)

    def _wait(self) -> None:
        due = [slot.restart_at for slot in self._slots if slot.restart_at is not None]
        timeout = max(0.0, min(due) - time.monotonic()) if due else 1.0
        with contextlib.suppress(InterruptedError):
            select.select([self._wake_read], [], [], min(timeout, 1.0))
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read, 512):
                pass

    def _handle_signals(self) -> None:
        while self._signals:
            signum = self._signals.pop(0)
            if signum in (signal.SIGTERM, signal.SIGINT):
                self._stop(signal.Signals(signum).name)
            elif signum == signal.SIGHUP:
                if self._stopping:
                    _log.info("processes_reload_skipped", reason="stopping")
                    continue
                _log.info("processes_reload", processes=self._live_pids())
                self._send(signal.SIGHUP)

    def _stop(self, reason: str) -> None:
        if self._stopping:  # the second time: stop without draining
            if not self._forced:
                self._forced = True
                _log.warning("processes_stopping_now", reason=reason)
                self._send(signal.SIGINT)
            return
        self._stopping = True
        _log.info("processes_stopping", reason=reason, processes=self._live_pids())
        # Without the supervisor's copies, a socket closes when its process stops listening:
        # new connections are refused then, as with one process.
        self._close_sockets()
        for slot in self._slots:
            slot.restart_at = None
        self._send(signal.SIGTERM)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            slot = next((s for s in self._slots if s.pid == pid), None)
            if slot is None:
                continue
            slot.pid = 0
            if self._metrics is not None:
                self._metrics.mark_dead(pid)
            self._ended(slot, pid, os.waitstatus_to_exitcode(status))

    def _ended(self, slot: _Slot, pid: int, code: int) -> None:
        how = {"exit_code": code} if code >= 0 else {"signal": signal.Signals(-code).name}
        if self._stopping:
            _log.info("process_stopped", slot=slot.index, process=pid, **how)
            return
        if code == STARTUP_FAILED:
            if slot.replacement:
                pause = slot.retry_later()
                _log.error(
                    "process_start_failed", slot=slot.index, process=pid, retry_in=pause, **how
                )
                return
            _log.error("process_start_failed", slot=slot.index, process=pid, **how)
            self._exit_code = 1
            self._stop("a process could not start")
            return
        slot.replacement, slot.failures = True, 0  # it started, and served
        lived = time.monotonic() - slot.started
        slot.restart_at = slot.started + max(lived, _RESTART_SECONDS)
        _log.error("process_exited", slot=slot.index, process=pid, seconds=round(lived, 3), **how)

    def _restart_due(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.restart_at is not None and slot.restart_at <= now and not self._stopping:
                slot.restart_at = None
                self._refresh_config()
                self._start(slot)

    def _refresh_config(self) -> None:
        """The routing file as it is now, for a replacement (the one in force if broken)."""
        with contextlib.suppress(ConfigError):
            self._config = load_config(self._config.path)

    def _start(self, slot: _Slot) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()  # what the processes share stays unwritten by their collections
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:  # out of processes or memory, for now
            if slot.replacement:
                pause = slot.retry_later()
                _log.error("process_fork_failed", slot=slot.index, error=str(exc), retry_in=pause)
            else:
                _log.error("process_fork_failed", slot=slot.index, error=str(exc))
                self._exit_code = 1
                self._stop("a process could not be forked")
            return
        if pid == 0:
            self._child(slot, parent)
        slot.pid, slot.started = pid, time.monotonic()
        _log.info("process_started", slot=slot.index, process=pid, workers=slot.workers)

    def _send(self, signum: int) -> None:
        for slot in self._slots:
            if slot.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.pid, signum)

    def _live_pids(self) -> list[int]:
        return [slot.pid for slot in self._slots if slot.pid]

    def _close_sockets(self) -> None:
        for slot in self._slots:
            slot.sock.close()

    # A serving process, after the fork.

    def _child(self, slot: _Slot, parent: int) -> NoReturn:
        code = 1
        try:
            self._enter_child(slot, parent)
            settings = replace(self._settings, workers=slot.workers)
            code = self._serve_one(settings, self._config, slot.sock)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except KeyboardInterrupt:  # SIGINT before its server started
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)

    def _enter_child(self, slot: _Slot, parent: int) -> None:
        signal.set_wakeup_fd(-1)
        os.close(self._wake_read)
        os.close(self._wake_write)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until the watcher's handler is set
        _die_with(parent)
        for other in self._slots:
            if other is not slot:
                other.sock.close()
        sys.stdout = _whole_lines()
        name_the_process(True)  # this one's pid from its first line


def _die_with(parent: int) -> None:
    """SIGTERM when the supervisor dies (Linux), so no process outlives it on the port."""
    if sys.platform.startswith("linux"):
        import ctypes  # here: a one-process gateway never loads it (about 1 MB)

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # it died before that was set
        os._exit(0)


def _whole_lines() -> io.TextIOWrapper:
    """Stdout writing at most PIPE_BUF bytes at a time, whole lines only (the log writes a
    line per call): the processes share one stdout, and a pipe keeps a write that small in one
    piece, so their lines never interleave mid-line."""
    raw = io.FileIO(sys.stdout.fileno(), "w", closefd=False)
    return io.TextIOWrapper(io.BufferedWriter(raw, buffer_size=select.PIPE_BUF))
