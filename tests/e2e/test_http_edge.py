"""The HTTP edge as clients meet it, through raw sockets where a client library would not send
the bytes, against a real `gateway serve`: pipelines of any length, WebSocket handshakes, clients
that leave mid-body or stop reading a stream, HEAD and byte ranges of a task's output.

tests/http/test_protocol.py feeds the protocol reads split where the test chooses.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.media_support import post_task, root_of, wait_for_task
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.metrics_scrape import scrape, total, value
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.waiting import wait_until

WRITE_TIMEOUT = 1
MAX_HEAD = 32 * 1024
LONG_STREAM = """
[providers.sim_long]
kind = "simulator"
max_output_tokens = 400000
tokens_per_second = 50000

[[models]]
id = "sim-long"
provider = "sim_long"
capability = "chat"
max_output_tokens = 400000
pricing = { input_usd_per_mtok = 0.01, output_usd_per_mtok = 0.01 }

[tenants.slow_reader]
"""
BODY_IDLE = 2
CONFIG = (
    MEDIA_CONFIG.replace(
        "task_lease_seconds = 3",
        f"task_lease_seconds = 3\nwrite_timeout_seconds = {WRITE_TIMEOUT}\n"
        f"body_idle_timeout_seconds = {BODY_IDLE}",
    )
    + LONG_STREAM
)
STREAMED_TOKENS = 200_000
"""Four seconds of stream, each chunk sent as it comes (paced)."""
TCP_ESTABLISHED = 1


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    process = start_gateway(tmp_path_factory.mktemp("edge"), CONFIG)
    yield process
    process.stop()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def envelope(self, code: str) -> dict[str, Any]:
        assert self.headers["content-type"].startswith("application/json"), self.headers
        error: dict[str, Any] = json.loads(self.body)["error"]
        assert error["code"] == code, error
        assert error["request_id"] == self.headers["x-request-id"]
        return error


class Connection:
    """A raw socket and what it has received but not yet parsed."""

    def __init__(self, gateway: GatewayProcess, *, receive_buffer: int | None = None) -> None:
        host, port = root_of(gateway.base_url).removeprefix("http://").split(":")
        self.sock = socket.socket()
        if receive_buffer is not None:  # before connecting, so the window is small from the start
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(10)
        self.sock.connect((host, int(port)))
        self.pending = b""

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.sock.close()

    def _fill(self, deadline: float) -> bool:
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = self.sock.recv(1 << 16)
        self.pending += chunk
        return bool(chunk)

    def answers(self, count: int, timeout: float = 20.0) -> list[Answer]:
        """The next `count` responses (each with a Content-Length)."""
        deadline = time.monotonic() + timeout
        out: list[Answer] = []
        while len(out) < count:
            head, blank, rest = self.pending.partition(b"\r\n\r\n")
            if not blank:
                assert self._fill(deadline), f"closed after {len(out)} of {count} answers"
                continue
            lines = head.decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, _, field = line.partition(":")
                headers[name.strip().lower()] = field.strip()
            length = int(headers["content-length"])
            while len(rest) < length:
                assert self._fill(deadline), "closed in the middle of a body"
                rest = self.pending.partition(b"\r\n\r\n")[2]
            out.append(Answer(int(lines[0].split()[1]), headers, rest[:length]))
            self.pending = rest[length:]
        return out

    def closed_by_server(self, timeout: float = 10.0) -> bool:
        """Whether the gateway ends the connection (nothing more than the buffered comes)."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        return True

    def tcp_state(self) -> int:
        """The socket's TCP state (Linux `tcp_info.tcpi_state`), read without reading data."""
        info = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
        return int(struct.unpack("B", info[:1])[0])


def health(request_id: str, head_size: int | None = None) -> bytes:
    """GET /v1/health whose head (up to its blank line) is `head_size` bytes."""
    head = f"GET /v1/health HTTP/1.1\r\nHost: gateway\r\nX-Request-Id: {request_id}\r\n"
    if head_size is not None:
        head += f"X-Pad: {'p' * (head_size - len(head) - len('X-Pad: ') - 4)}\r\n"
    request = (head + "\r\n").encode()
    assert head_size is None or len(request) == head_size
    return request


# Pipelining ----------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [40, 100, 500])
def test_pipelined_requests_in_one_write_are_all_answered_in_order(
    gateway: GatewayProcess, count: int
) -> None:
    ids = [f"pipe-{count}-{i}" for i in range(count)]
    pipeline = b"".join(health(request_id, 1045) for request_id in ids)
    assert len(pipeline) > MAX_HEAD  # 40 of them: 41.8 KB in one write
    with Connection(gateway) as connection:
        # Sent from a thread while the answers are read: neither side's buffers can fill up.
        sender = threading.Thread(target=connection.sock.sendall, args=(pipeline,))
        sender.start()
        answers = connection.answers(count)
        sender.join()
    assert [a.status for a in answers] == [200] * count
    assert [a.headers["x-request-id"] for a in answers] == ids


def test_heads_each_just_within_the_limit_pass_in_one_write(gateway: GatewayProcess) -> None:
    ids = ["near-1", "near-2", "near-3"]
    with Connection(gateway) as connection:
        connection.sock.sendall(b"".join(health(request_id, MAX_HEAD) for request_id in ids))
        answers = connection.answers(3)
    assert [(a.status, a.headers["x-request-id"]) for a in answers] == [(200, i) for i in ids]


def test_an_oversized_pipelined_head_is_refused_after_those_before_it(
    gateway: GatewayProcess,
) -> None:
    pipeline = health("over-1") + health("over-2") + health("over-3", 40_000) + health("over-4")
    with Connection(gateway) as connection:
        connection.sock.sendall(pipeline)
        first, second, refused = connection.answers(3)
        assert connection.closed_by_server()
    assert (first.status, first.headers["x-request-id"]) == (200, "over-1")
    assert (second.status, second.headers["x-request-id"]) == (200, "over-2")
    assert refused.status == 431
    refused.envelope("request_headers_too_large")
    assert connection.pending == b""  # the fourth request was never answered


# WebSocket -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/v1/realtime", 501, "not_implemented"),
        ("/ws", 404, "not_found"),
        ("/v1/chat/completions", 400, "invalid_request"),
        ("/v1/health", 400, "invalid_request"),
    ],
)
@pytest.mark.parametrize("complete", [True, False], ids=["handshake", "bare-upgrade"])
def test_a_websocket_handshake_gets_the_envelope(
    gateway: GatewayProcess, path: str, status: int, code: str, complete: bool
) -> None:
    lines = [f"GET {path} HTTP/1.1", "Host: gateway", "Upgrade: websocket", "Connection: Upgrade"]
    if complete:
        lines += ["Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13"]
    with Connection(gateway) as connection:
        connection.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        (answer,) = connection.answers(1)
        assert connection.closed_by_server()
    assert answer.status == status
    assert answer.headers["connection"] == "close"
    assert "upgrade" not in answer.headers
    answer.envelope(code)


# Clients that leave --------------------------------------------------------------------------


def _log_lines(gateway: GatewayProcess, request_id: str) -> list[dict[str, Any]]:
    lines = []
    for line in gateway.logs().splitlines():
        if request_id in line and line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def _temp_files(gateway: GatewayProcess) -> list[Path]:
    return list((Path(gateway.env["GATEWAY_DATA_DIR"]) / "artifacts").rglob(".*.tmp"))


def _upload_request(gateway: GatewayProcess, request_id: str) -> bytes:
    """A 4 MB upload; half of it is enough to start writing its file."""
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
        "0000000d49444154789c63fccfc0500f0004850180848c2cb30000000049454e44ae426082"
    )
    body = (
        b'--cut\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n'
        b"Content-Type: image/png\r\n\r\n" + png + bytes(4_000_000) + b"\r\n--cut--\r\n"
    )
    head = (
        f"POST /v1/uploads HTTP/1.1\r\nHost: gateway\r\nX-Request-Id: {request_id}\r\n"
        f"Authorization: Bearer {gateway.api_key}\r\n"
        f"Content-Type: multipart/form-data; boundary=cut\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _cut_upload(gateway: GatewayProcess, request_id: str) -> None:
    request = _upload_request(gateway, request_id)
    with Connection(gateway) as connection:
        connection.sock.sendall(request[: len(request) // 2])
        # The file is being written when the client goes: its temp file exists.
        wait_until(lambda: {"files": _temp_files(gateway)}, lambda v: bool(v["files"]))


def _cut_image_create(gateway: GatewayProcess, request_id: str) -> None:
    body = json.dumps({"model": "auto", "prompt": "a lighthouse at dawn", "n": 1}).encode()
    head = (
        f"POST /v1/images/generations HTTP/1.1\r\nHost: gateway\r\nX-Request-Id: {request_id}\r\n"
        f"Authorization: Bearer {gateway.api_key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with Connection(gateway) as connection:
        connection.sock.sendall(head.encode() + body[: len(body) // 2])


@pytest.mark.parametrize(
    ("route", "cut"),
    [("/v1/uploads", _cut_upload), ("/v1/images/generations", _cut_image_create)],
    ids=["upload", "image-create"],
)
def test_a_client_that_leaves_mid_body_is_a_client_event(
    gateway: GatewayProcess, route: str, cut: Any
) -> None:
    request_id = f"cut-{route.rsplit('/', 1)[-1]}"
    _, before = scrape(gateway)
    cut(gateway, request_id)
    wait_until(
        lambda: {"events": [line["event"] for line in _log_lines(gateway, request_id)]},
        lambda v: "request" in v["events"],
        what=f"the request line of {request_id}",
    )
    _, after = scrape(gateway)
    labels = {"route": route, "method": "POST", "model": ""}
    counted = "gateway_requests_total"
    assert (
        value(after, counted, status="499", **labels)
        - value(before, counted, status="499", **labels)
        == 1
    )
    server_errors = {
        status for (name, ls), v in after.items() for key, status in ls if key == "status"
        if name == counted and ("route", route) in ls and status.startswith("5") and v
    }  # fmt: skip
    assert server_errors == set()
    assert total(after, counted, route=route) - total(before, counted, route=route) == 1
    lines = _log_lines(gateway, request_id)
    events = {line["event"]: line for line in lines}
    assert events["client_disconnected"]["level"] == "info"
    assert events["client_disconnected"]["route"] == route
    assert (events["request"]["status"], events["request"]["error"]) == (
        499,
        "client_closed_request",
    )
    assert all(line["level"] in ("info", "warning") for line in lines), lines
    assert "unhandled_exception" not in gateway.logs()
    assert _temp_files(gateway) == []  # a cut upload leaves nothing behind


def test_an_upload_whose_body_stalls_is_a_408_counted_under_its_route(
    gateway: GatewayProcess,
) -> None:
    request_id = "stalled-upload"
    _, before = scrape(gateway)
    request = _upload_request(gateway, request_id)
    with Connection(gateway) as connection:
        connection.sock.sendall(request[: len(request) // 2])
        (answer,) = connection.answers(1, timeout=BODY_IDLE + 10)
    assert answer.envelope("request_timeout")["request_id"] == request_id
    wait_until(
        lambda: {"events": [line["event"] for line in _log_lines(gateway, request_id)]},
        lambda v: "request" in v["events"],
        what=f"the request line of {request_id}",
    )
    _, after = scrape(gateway)
    labels = {"route": "/v1/uploads", "method": "POST", "model": "", "status": "408"}
    counted = "gateway_requests_total"
    assert value(after, counted, **labels) - value(before, counted, **labels) == 1
    (line,) = [line for line in _log_lines(gateway, request_id) if line["event"] == "request"]
    assert (line["status"], line["error"]) == (408, "request_timeout")
    assert "unhandled_exception" not in gateway.logs()
    assert _temp_files(gateway) == []


def test_a_stream_whose_client_stops_reading_is_closed_and_settled(
    gateway: GatewayProcess,
) -> None:
    key = gateway.new_key("slow_reader")
    gateway.grant("slow_reader", "100")
    body = json.dumps(
        {
            "model": "sim-long",
            "stream": True,
            "messages": [{"role": "user", "content": f"[[sim:tokens={STREAMED_TOKENS}]] go"}],
        }
    ).encode()
    request = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nX-Request-Id: slow-reader\r\n"
        f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    with Connection(gateway, receive_buffer=4096) as connection:
        started = time.monotonic()
        connection.sock.sendall(request)
        # Never read: the gateway fills its buffers, waits `WRITE_TIMEOUT`, and resets.
        wait_until(
            lambda: {"state": connection.tcp_state()},
            lambda v: v["state"] != TCP_ESTABLISHED,
            timeout=WRITE_TIMEOUT + 15,
            what="the gateway to close the connection",
        )
        assert time.monotonic() - started >= WRITE_TIMEOUT
    client = httpx.Client(
        base_url=root_of(gateway.base_url), headers={"Authorization": f"Bearer {key}"}
    )
    with client:
        wallet = wait_until(
            lambda: client.get("/v1/wallet").json(),
            lambda w: w["held_credits"] == "0.0000",
            what="the hold to be settled",
        )
        ledger = client.get("/v1/wallet/ledger").json()["data"]
    charges = [entry for entry in ledger if entry["kind"] == "charge"]
    assert [entry["request_id"] for entry in charges] == ["slow-reader"]
    assert wallet["balance_credits"] == charges[0]["balance_after_credits"]
    assert "response_write_timeout" in gateway.logs()
    # The upstream call was closed: far fewer chunks went out than the answer had.
    _, samples = scrape(gateway)
    sent = value(samples, "gateway_stream_chunks_sum", model="sim-long")
    assert 0 < sent < STREAMED_TOKENS / 2


# Artifact content ----------------------------------------------------------------------------


def test_head_and_ranges_of_a_task_output_by_its_signed_url(gateway: GatewayProcess) -> None:
    root = root_of(gateway.base_url)
    with httpx.Client(base_url=root, headers={"Authorization": f"Bearer {gateway.api_key}"}) as c:
        task = post_task(c, "/v1/images/generations", {"model": "auto", "prompt": "a fox"})
        done = wait_for_task(c, task["task_id"])
    assert done["status"] == "succeeded", done
    image = done["output"]["images"][0]
    url, size = root + image["url"], image["size_bytes"]
    with httpx.Client() as keyless:
        whole = keyless.get(url)
        head = keyless.head(url)
        part = keyless.get(url, headers={"Range": "bytes=100-199"})
        tail = keyless.get(url, headers={"Range": "bytes=-10"})
        beyond = keyless.get(url, headers={"Range": f"bytes={size}-"})
        several = keyless.get(url, headers={"Range": "bytes=0-1,5-6"})
    assert whole.status_code == 200 and len(whole.content) == size
    assert whole.headers["accept-ranges"] == "bytes"
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == size
    assert head.headers["content-type"] == whole.headers["content-type"] == image["mime_type"]
    assert head.headers["accept-ranges"] == "bytes"
    assert part.status_code == 206 and part.content == whole.content[100:200]
    assert part.headers["content-range"] == f"bytes 100-199/{size}"
    assert tail.status_code == 206 and tail.content == whole.content[-10:]
    assert beyond.status_code == 416
    assert beyond.headers["content-range"] == f"bytes */{size}"
    assert beyond.json()["error"]["code"] == "range_not_satisfiable"
    assert several.status_code == 200 and several.content == whole.content
