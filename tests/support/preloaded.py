"""`gateway` commands run in processes forked from an interpreter that has imported the gateway.

Hundreds of tests start `gateway serve` or run a `gateway` command (keys, credits, tasks), and
most of such a process's CPU went to starting Python and importing the gateway, Litestar,
uvicorn and the adapters: a CLI call took ~0.35 s of CPU, ~0.06 s forked from here, and a
server's start ~1 s, ~0.4 s forked (this project's 2-core machine). Each test worker keeps one
preloaded interpreter (`python -m tests.support.preloaded`, started on first use): it imports
every module of `gateway/` and `providers/` once, then forks a child per command. The child
takes the command's environment, working directory and standard streams and runs
`gateway.app.cli.main(argv)` as `python -m gateway.app.cli ARGV` would; it is a process of its
own, with its own pid, that takes signals like any other, and its exit code is main's.

What differs from a new interpreter:
- the command line in /proc is the preloader's, and modules are imported already (so a test of
  what a command imports starts a new interpreter);
- memory starts shared copy-on-write with the preloader, whose objects are frozen for the
  collector (`gc.freeze`): a measure of how much a process holds, rather than of how much it
  grows, needs `fresh=True` (`tests.support.gateway_process.start_gateway`);
- at the end it joins its threads, runs its exit functions and flushes its streams, but does not
  tear every module down (in a child sharing the preloaded heap that cost ~0.6 s of CPU);
- a crash prints a traceback (`faulthandler`).
An environment that differs from the preloader's in what is read while importing (`PYTHON*`,
`PROMETHEUS_MULTIPROC_DIR`), and `serve` on several processes, get a new interpreter
automatically. The console script (`.venv/bin/gateway`) and `python -m gateway.app.cli` stay
covered by the tests that run them so (tests/e2e/test_first_hour.py, tests/app/test_startup.py,
tests/e2e/test_processes.py).
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import gc
import json
import os
import pkgutil
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "gateway" / "app" / "cli.py"
_MAX_MESSAGE = 1 << 20
_ENVIRONMENT_READ_AT_IMPORT = ("PROMETHEUS_MULTIPROC_DIR",)
_ENVIRONMENT_NOT_COMPARED = (  # PYTHON* variables with nothing left to change in a child
    "PYTHONDONTWRITEBYTECODE",  # everything is imported already
    "PYTHONUNBUFFERED",  # when writes reach a file, not what is written: children are unbuffered
)
_MORE_MODULES = (  # imported later by libraries on a start's path, not by the project's modules
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto",
)

__all__ = ["ForkedProcess", "Process", "run", "spawn"]

Stream = int | IO[Any] | None


# --- the test worker's side ----------------------------------------------------------------


class ForkedProcess:
    """A forked `gateway` command: the parts of `subprocess.Popen` the tests use.

    The preloader reaps the child and reports its wait status on `status`, a socket of this
    process only; `returncode` follows Popen's convention (negative: killed by that signal)."""

    def __init__(self, args: list[str], pid: int, pidfd: int, status: socket.socket) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._status = status

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._status], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Through the process's pidfd: never to another process that took its pid since (the
        preloader reaps at once, and pids go round quickly here: pid_max is 32768)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read_status(self) -> None:
        message = self._status.recv(_MAX_MESSAGE)
        self._close()
        if not message:
            raise RuntimeError(f"the preloaded interpreter exited before process {self.pid}")
        self.returncode = os.waitstatus_to_exitcode(json.loads(message)["status"])

    def _close(self) -> None:
        self._status.close()
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1

    def __del__(self) -> None:
        self._close()


class _Preloader:
    """This test process's preloaded interpreter and the socket its requests go through."""

    def __init__(self) -> None:
        self.environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115  # kept for the preloader's life
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.preloaded", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=self.environment,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        theirs.close()
        if self._control.recv(16) != b"ready":
            self._process.wait(timeout=10)
            self._log.seek(0)
            raise RuntimeError(f"the preloaded interpreter failed:\n{self._log.read().decode()}")

    def serves(self, argv: Sequence[str], env: Mapping[str, str]) -> bool:
        """Whether a child runs `argv` with `env` as a new interpreter would. Not `serve` on
        several processes: their metrics need prometheus_client imported after the folder they
        share is set (gateway/app/processes.py)."""
        several = "--processes" in argv or env.get("GATEWAY_PROCESSES", "1") not in ("", "1")
        if argv[:1] == ["serve"] and several:
            return False
        names = {*env, *self.environment}
        return all(
            env.get(name) == self.environment.get(name)
            for name in names
            if (name.startswith("PYTHON") and name not in _ENVIRONMENT_NOT_COMPARED)
            or name in _ENVIRONMENT_READ_AT_IMPORT
        )

    def fork(
        self, argv: Sequence[str], env: Mapping[str, str], cwd: Path | str, streams: list[int]
    ) -> ForkedProcess:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        unique = list(dict.fromkeys(streams))
        request = {
            "argv": list(argv),
            "env": dict(env),
            "cwd": str(cwd),
            "streams": [unique.index(fd) for fd in streams],
        }
        with self._lock:
            socket.send_fds(
                self._control, [json.dumps(request).encode()], [theirs.fileno(), *unique]
            )
        theirs.close()
        reply, fds, _, _ = socket.recv_fds(ours, _MAX_MESSAGE, 1)
        if not reply:
            raise RuntimeError("the preloaded interpreter did not answer")
        answer = json.loads(reply)
        if "error" in answer:
            raise OSError(answer["error"])
        return ForkedProcess(["gateway", *argv], int(answer["pid"]), fds[0], ours)

    def close(self) -> None:
        self._control.close()  # the preloader exits when it reads the end of its socket
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=5)
        self._log.close()


Process = ForkedProcess | subprocess.Popen[bytes]
"""What `spawn` returns: a forked child, or a new interpreter where the preloader can't serve."""

_preloader: _Preloader | None = None
_preloader_lock = threading.Lock()


def _the_preloader() -> _Preloader:
    global _preloader
    with _preloader_lock:
        if _preloader is None:
            _preloader = _Preloader()
            atexit.register(_preloader.close)
        return _preloader


def _fd(stream: Stream, default: int, opened: list[int]) -> int:
    if stream is None:
        return default
    if stream == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR)
        opened.append(fd)
        return fd
    if isinstance(stream, int):
        return stream
    return stream.fileno()


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | str = ROOT,
    stdin: Stream = subprocess.DEVNULL,
    stdout: Stream = None,
    stderr: Stream = None,
) -> Process:
    """`gateway ARGV`, as `subprocess.Popen([python, "-m", "gateway.app.cli", *argv], ...)`.

    Streams are files or descriptors (`subprocess.STDOUT` for stderr: with stdout), not pipes
    to read while it runs. An environment the preloader cannot serve gets a new interpreter."""
    preloader = _the_preloader()
    if not preloader.serves(argv, env):
        return subprocess.Popen(
            [sys.executable, "-m", "gateway.app.cli", *argv],
            env=dict(env),
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
        )
    opened: list[int] = []
    try:
        out = _fd(stdout, 1, opened)
        err = out if stderr == subprocess.STDOUT else _fd(stderr, 2, opened)
        return preloader.fork(argv, env, cwd, [_fd(stdin, 0, opened), out, err])
    finally:
        for fd in opened:
            os.close(fd)


def run(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | str = ROOT, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`gateway ARGV` to its end, as `subprocess.run(..., capture_output=True, text=True)`."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = spawn(argv, env=env, cwd=cwd, stdout=out, stderr=err)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            ["gateway", *argv],
            code,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )


# --- the preloaded interpreter ---------------------------------------------------------------


@dataclass(frozen=True)
class _Command:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    streams: list[int]  # stdin, stdout, stderr as descriptors of this process


def _preload() -> None:
    """Every module of the project (a `gateway` command imports some of them lazily), and what
    libraries import on a start's path."""
    import importlib

    for package in ("gateway", "providers"):
        root = importlib.import_module(package)
        for module in pkgutil.walk_packages(root.__path__, f"{package}."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    for name in _MORE_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    if threading.active_count() != 1:  # a fork copies one thread: any other would be lost
        raise RuntimeError(f"a thread started while importing: {threading.enumerate()}")


def _serve(control: socket.socket) -> _Command | None:
    """Fork a child per request until the test worker closes its end; returns only in a child
    (its command) or at that end (None). Every child is reaped here and its wait status sent
    on the socket its request brought."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}

    def in_child(command: _Command, status: socket.socket) -> _Command:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        selector.close()
        control.close()
        os.close(wake_read)
        os.close(wake_write)
        for other in children.values():
            other.close()
        status.close()
        return command

    while True:
        for key, _ in selector.select():
            if key.fileobj is control:
                message, fds, _, _ = socket.recv_fds(control, _MAX_MESSAGE, 8)
                if not message:
                    return None
                request = json.loads(message)
                status = socket.socket(fileno=fds[0])
                streams = [fds[1 + index] for index in request["streams"]]
                command = _Command(request["argv"], request["env"], request["cwd"], streams)
                try:
                    pid = os.fork()
                except OSError as exc:
                    status.send(json.dumps({"error": str(exc)}).encode())
                    pid = -1
                if pid == 0:
                    return in_child(command, status)
                for fd in fds[1:]:
                    os.close(fd)
                if pid > 0:
                    pidfd = os.pidfd_open(pid)
                    socket.send_fds(status, [json.dumps({"pid": pid}).encode()], [pidfd])
                    os.close(pidfd)
                    children[pid] = status
                else:
                    status.close()
            else:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_read, 4096):
                        pass
        _reap(children)


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        report = children.pop(pid, None)
        if report is not None:
            with contextlib.suppress(OSError):  # the test process may be gone
                report.send(json.dumps({"status": status}).encode())
            report.close()


def _become(command: _Command) -> None:
    """Turn this forked child into `python -m gateway.app.cli ARGV` as Popen would start it."""
    for target, fd in enumerate(command.streams):
        os.dup2(fd, target)  # a copy: a later stream may be the same descriptor
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the received streams among the rest
    faulthandler.enable()  # a crash leaves a traceback in the command's stderr, not silence
    os.chdir(command.cwd)
    os.environ.clear()
    os.environ.update(command.env)
    sys.argv = [str(CLI), *command.argv]


def _run(argv: list[str]) -> NoReturn:
    """`main(argv)` and the end of a Python process: non-daemon threads joined, exit
    functions run, streams flushed. Not the tearing down of every module, which in a child
    that shares the preloaded heap touches all of it: 0.6 s of CPU where the command took 0.05.
    """
    try:
        from gateway.app.cli import main

        code = _exit_code(main(argv))
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter's exit calls
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _exit_code(value: object) -> int:
    """The exit status Python gives `raise SystemExit(value)`."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _main(control_fd: int) -> None:
    control = socket.socket(fileno=control_fd)
    _preload()
    gc.freeze()  # the children's collections skip the preloaded objects (and leave them shared)
    control.send(b"ready")
    command = _serve(control)
    if command is None:
        return
    _become(command)
    _run(command.argv)


if __name__ == "__main__":
    _main(int(sys.argv[1]))
