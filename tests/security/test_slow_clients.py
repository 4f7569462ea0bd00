"""Slow clients cannot hold the gateway: 200 connections dribbling request heads and bodies a
byte at a time, and meanwhile a normal client gets /v1/health and a chat answer at once; then
the gateway sheds them at its configured bounds (408 in the envelope), dribbling or not.

tests/e2e/test_hostile_http.py shows each timeout on one connection; this is the crowd.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import SIMULATOR_CONFIG
from tests.support.serial import SERIAL

pytestmark = SERIAL

HEAD_TIMEOUT = 4
BODY_IDLE = 2
CONFIG = SIMULATOR_CONFIG.replace(
    "max_body_bytes = 65536",
    f"max_body_bytes = 65536\nheader_timeout_seconds = {HEAD_TIMEOUT}\n"
    f"body_idle_timeout_seconds = {BODY_IDLE}",
)
SLOW_HEADS = 100
SLOW_BODIES = 100
DRIBBLE_SECONDS = 0.25


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    process = start_gateway(tmp_path_factory.mktemp("slow"), CONFIG)
    yield process
    process.stop()


@dataclass
class Dribbler:
    """Connections that each send a byte every `DRIBBLE_SECONDS` until told to stop; what
    each one was answered is kept."""

    sockets: dict[socket.socket, str] = field(default_factory=dict)
    answers: dict[socket.socket, bytes] = field(default_factory=dict)
    closed_at: dict[socket.socket, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    paused: threading.Event = field(default_factory=threading.Event)
    """Set: the body dribblers fall silent (the head dribblers go on)."""

    def open(self, address: tuple[str, int], head: bytes, kind: str) -> None:
        sock = socket.create_connection(address, timeout=5)
        sock.sendall(head)
        sock.setblocking(False)
        self.sockets[sock] = kind
        self.answers[sock] = b""

    def run(self) -> None:
        with selectors.DefaultSelector() as selector:
            for sock in self.sockets:
                selector.register(sock, selectors.EVENT_READ)
            next_byte = time.monotonic()
            while not self.stop.is_set():
                for key, _ in selector.select(timeout=0.05):
                    conn = key.fileobj
                    assert isinstance(conn, socket.socket)
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        data = b""
                    self.answers[conn] += data
                    if not data:
                        selector.unregister(conn)
                        self.closed_at[conn] = time.monotonic()
                if time.monotonic() >= next_byte:
                    next_byte += DRIBBLE_SECONDS
                    for sock, kind in self.sockets.items():
                        if sock in self.closed_at or (kind == "body" and self.paused.is_set()):
                            continue
                        with contextlib.suppress(OSError):
                            sock.send(b"X" if kind == "head" else b" ")

    def open_count(self, kind: str) -> int:
        return sum(1 for s, k in self.sockets.items() if k == kind and s not in self.closed_at)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def _address(gateway: GatewayProcess) -> tuple[str, int]:
    host, port = gateway.base_url.removeprefix("http://").removesuffix("/v1").split(":")
    return host, int(port)


def test_a_crowd_of_slow_clients_does_not_hold_the_gateway(gateway: GatewayProcess) -> None:
    address = _address(gateway)
    host = f"{address[0]}:{address[1]}"
    chat = {"model": "sim-chat-1", "messages": [{"role": "user", "content": "hi"}]}
    slow_head = f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode()
    slow_body = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {gateway.api_key}\r\nContent-Type: application/json\r\n"
        "Content-Length: 60000\r\n\r\n"
    ).encode() + json.dumps(chat).encode()[:-1]  # the JSON never closes
    crowd = Dribbler()
    try:
        for _ in range(SLOW_HEADS):
            crowd.open(address, slow_head, "head")
        for _ in range(SLOW_BODIES):
            crowd.open(address, slow_body, "body")
        started = time.monotonic()
        dribbling = threading.Thread(target=crowd.run, name="dribbler")
        dribbling.start()
        try:
            time.sleep(2 * DRIBBLE_SECONDS)  # every connection has dribbled by now
            health, answers = [], []
            with httpx.Client(base_url=gateway.base_url, timeout=10) as client:
                auth = {"Authorization": f"Bearer {gateway.api_key}"}
                for _ in range(10):
                    began = time.monotonic()
                    assert client.get("/health").status_code == 200
                    health.append(time.monotonic() - began)
                for _ in range(5):
                    began = time.monotonic()
                    response = client.post("/chat/completions", json=chat, headers=auth)
                    assert response.status_code == 200, response.text
                    answers.append(time.monotonic() - began)
            measured = time.monotonic() - started
            holding = crowd.open_count("head"), crowd.open_count("body")

            # Then the body dribblers fall silent; everyone is shed at the configured bounds.
            crowd.paused.set()
            paused = time.monotonic()
            deadline = started + HEAD_TIMEOUT + 3
            while time.monotonic() < deadline and len(crowd.closed_at) < len(crowd.sockets):
                time.sleep(0.1)
        finally:
            crowd.stop.set()
            dribbling.join()
    finally:
        crowd.close()

    assert measured < HEAD_TIMEOUT, "the measurements must happen while the crowd is held"
    assert holding == (SLOW_HEADS, SLOW_BODIES), f"the crowd was not all there: {holding}"
    assert max(health) < 1.0, f"/v1/health took up to {max(health):.2f} s under the crowd"
    assert max(answers) < 2.0, f"a chat took up to {max(answers):.2f} s under the crowd"

    assert len(crowd.closed_at) == len(crowd.sockets), "some slow clients were never shed"
    for sock, kind in crowd.sockets.items():
        answer = crowd.answers[sock]
        assert answer.startswith(b"HTTP/1.1 408"), (kind, answer[:80])
        assert b'"code":"request_timeout"' in answer
        if kind == "head":  # dribbling all along: the head's own deadline
            assert crowd.closed_at[sock] - started < HEAD_TIMEOUT + 1.5
        else:  # silent from `paused`: the body's idle bound
            assert crowd.closed_at[sock] - paused < BODY_IDLE + 1.5
