"""Session-wide fixtures shared by every test package.

`redis_url`: a real Redis for the whole session. `REDIS_URL` when set; otherwise a private
`redis-server` on a free port (no persistence) started here and stopped at the end. Without
either, Redis tests skip locally and fail on CI (`CI=true`), where a missing Redis is a bug.
Tests isolate themselves with a key prefix of their own (see tests/store/conftest.py).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["redis_url"]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Redis is required on CI: {reason}")
    pytest.skip(f"no Redis: {reason}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _start_redis(binary: str, workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir)]
    args += ["--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and proc.poll() is None:
        if _answers_ping(port):
            return proc, port
        time.sleep(0.02)
    _stop(proc)
    raise RuntimeError(f"redis-server did not answer on port {port}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a Redis that answers, for the whole session."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        _unavailable("REDIS_URL is not set and there is no redis-server binary")
        return
    try:
        proc, port = _start_redis(binary, tmp_path_factory.mktemp("redis"))
    except (OSError, RuntimeError) as exc:
        _unavailable(f"could not start redis-server: {exc}")
        return
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(proc)
