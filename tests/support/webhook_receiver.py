"""A local webhook receiver that answers by script, for the callback tests.

Each path has a script: a list of answers given in turn (the last one repeats). An answer is
a status, optionally with headers, or `HANG` (no answer until the client hangs up, or a 200
after `HANG_SECONDS`, past the gateway's 10 s wait for the status line). Every request is
kept: path, headers (lower-case names), body, and when it arrived (`time.monotonic()`);
`in_flight` counts the connections being answered (a hung one until its client leaves).
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["HANG", "HANG_SECONDS", "Answer", "Received", "Receiver", "receiver"]

HANG = "hang"
HANG_SECONDS = 12.0


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class Receiver:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.scripts: dict[str, Sequence[Answer | str]] = {}
        self.received: list[Received] = []
        self.in_flight = 0
        self.most_in_flight = 0
        """Requests being answered at once, now and at the most."""
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver._answer(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def hits(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path == path]

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length)
        headers = {name.lower(): value for name, value in handler.headers.items()}
        with self._lock:
            turn = sum(1 for r in self.received if r.path == handler.path)
            self.received.append(Received(handler.path, headers, body, time.monotonic()))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self._reply(handler, path=handler.path, turn=turn)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _reply(self, handler: BaseHTTPRequestHandler, *, path: str, turn: int) -> None:
        script = self.scripts.get(path, [Answer(404)])
        answer = script[min(turn, len(script) - 1)]
        if answer == HANG:
            if _client_left(handler.connection, HANG_SECONDS):
                return
            answer = Answer(200)
        assert isinstance(answer, Answer)
        handler.send_response(answer.status)
        for name, value in answer.headers.items():
            handler.send_header(name, value)
        body = b"" if answer.status in (204, 304) else b"ok"
        if body:
            handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def _client_left(connection: socket.socket, seconds: float) -> bool:
    """Wait up to `seconds` for the client to close the connection; True if it did."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([connection], [], [], min(left, 0.5))
        if readable:
            try:
                if not connection.recv(1, socket.MSG_PEEK):
                    return True
            except OSError:
                return True
            time.sleep(0.01)  # (bytes after the request: not a close)
    return False


@contextmanager
def receiver(host: str = "127.0.0.1") -> Iterator[Receiver]:
    server = Receiver(host)
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()
