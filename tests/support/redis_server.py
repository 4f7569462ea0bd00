"""A private `redis-server` process that tests start, pause, kill and restart.

Fault tests need a Redis of their own: a shared one must never be stopped under other tests.
With `durable=True` every write is in the append-only file before Redis answers it
(`appendfsync always`), so a `kill -9` and a restart lose nothing that was acknowledged, like
the production settings in docs/store.md.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.ports import free_port
from tests.support.waiting import answers_or_exits

__all__ = ["RedisServer", "answers_ping"]


def answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    def __init__(self, binary: str, workdir: Path, *, durable: bool = False) -> None:
        self.binary = binary
        self.workdir = workdir
        self.durable = durable
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(self.workdir), "--save", ""]
        if self.durable:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if answers_or_exits(self.process, lambda: answers_ping(self.port), 10.0):
            return
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    @classmethod
    @contextlib.contextmanager
    def running(cls, binary: str, workdir: Path, *, durable: bool = False) -> Iterator[RedisServer]:
        """A server started in `workdir` (made here), stopped when the block ends."""
        server = cls(binary, workdir, durable=durable)
        workdir.mkdir(parents=True)
        server.start()
        try:
            yield server
        finally:
            server.stop()

    def pause(self) -> None:
        """SIGSTOP: connections stay open, nothing is answered (a stalled store)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        """`kill -9`: what was acknowledged is in the append-only file (durable mode)."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGCONT)  # a paused server cannot act on SIGTERM
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
