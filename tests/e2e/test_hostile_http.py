"""Hostile bytes and headers against a running gateway, through raw sockets where a client
library would refuse to send them: every one a clear 4xx in the envelope, quickly, and the
gateway keeps serving everyone else meanwhile."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import SIMULATOR_CONFIG
from tests.support.serial import SERIAL
from tests.support.waiting import wait_until

CONFIG = SIMULATOR_CONFIG.replace(
    "max_body_bytes = 65536",
    "max_body_bytes = 65536\nheader_timeout_seconds = 1\nbody_idle_timeout_seconds = 1",
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    process = start_gateway(tmp_path_factory.mktemp("gw"), CONFIG)
    yield process
    process.stop()


def _address(gateway: GatewayProcess) -> tuple[str, int]:
    host, port = gateway.base_url.removeprefix("http://").removesuffix("/v1").split(":")
    return host, int(port)


def _read_response(sock: socket.socket, timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one HTTP/1.1 response with a content-length."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, body


Response = tuple[int, dict[str, str], bytes]


def _envelope(response: Response, code: str) -> dict[str, Any]:
    _, headers, body = response
    error = json.loads(body)["error"]
    assert error["code"] == code, error
    assert error["request_id"] == headers["x-request-id"]
    assert headers["content-type"].startswith("application/json")
    return error


def _raw(gateway: GatewayProcess, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(_address(gateway), timeout=5) as sock:
        sock.sendall(request)
        return _read_response(sock)


def _chat_request(gateway: GatewayProcess, body: bytes, *extra: str) -> bytes:
    host, port = _address(gateway)
    lines = [
        "POST /v1/chat/completions HTTP/1.1",
        f"Host: {host}:{port}",
        f"Authorization: Bearer {gateway.api_key}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *extra,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@SERIAL
def test_a_huge_header_is_refused_at_once_while_health_stays_fast(
    gateway: GatewayProcess,
) -> None:
    health_times: list[float] = []
    stop = threading.Event()

    def poll_health() -> None:
        with httpx.Client(timeout=2) as client:
            while not stop.is_set():
                started = time.monotonic()
                assert client.get(f"{gateway.base_url}/health").status_code == 200
                health_times.append(time.monotonic() - started)
                time.sleep(0.01)  # the poller's pace

    poller = threading.Thread(target=poll_health)
    poller.start()
    try:
        wait_until(lambda: health_times or not poller.is_alive(), what="a first /health answer")
        with socket.create_connection(_address(gateway), timeout=10) as sock:
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ")
            piece = b"a" * (1024 * 1024)
            try:
                for _ in range(64):  # 64 MB of one header, if the server kept reading
                    sock.sendall(piece)
            except OSError:
                pass  # refused and closed: what is left of the header is not read
            response = _read_response(sock)
        time.sleep(0.3)  # the behaviour under test: /health stays fast after the attack too
    finally:
        stop.set()
        poller.join()
    assert response[0] == 431
    _envelope(response, "request_headers_too_large")
    assert health_times, "health was never answered"
    assert max(health_times) < 1.0, f"health stalled behind the header: {max(health_times):.2f}s"


def test_too_many_headers_are_refused(gateway: GatewayProcess) -> None:
    headers = "".join(f"X-H{i}: v\r\n" for i in range(150))
    response = _raw(gateway, f"GET /v1/health HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
    assert response[0] == 431
    _envelope(response, "request_headers_too_large")


def test_headers_within_the_limits_pass(gateway: GatewayProcess) -> None:
    headers = "".join(f"X-H{i}: {'v' * 200}\r\n" for i in range(90))
    response = _raw(gateway, f"GET /v1/health HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
    assert response[0] == 200


def test_a_head_sent_too_slowly_is_cut_off(gateway: GatewayProcess) -> None:
    with socket.create_connection(_address(gateway), timeout=5) as sock:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
        for _ in range(3):  # a byte every 0.5 s: each read is quick, the head never ends
            time.sleep(0.5)  # the behaviour under test: a head dribbled out
            try:
                sock.sendall(b"X")
            except OSError:
                break
        response = _read_response(sock)
    assert response[0] == 408
    assert _envelope(response, "request_timeout")["retryable"] is True


def test_an_idle_connection_is_closed(gateway: GatewayProcess) -> None:
    with socket.create_connection(_address(gateway), timeout=5) as sock:
        time.sleep(1.5)  # the behaviour under test: idle past the keep-alive timeout
        response = _read_response(sock)
    assert response[0] == 408


def test_a_stalled_body_is_cut_off(gateway: GatewayProcess) -> None:
    body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
    request = _chat_request(gateway, body.encode())
    with socket.create_connection(_address(gateway), timeout=5) as sock:
        sock.sendall(request[:-10])  # the head and most of the body, then silence
        response = _read_response(sock)
    assert response[0] == 408
    _envelope(response, "request_timeout")


def test_a_malformed_request_gets_the_envelope(gateway: GatewayProcess) -> None:
    response = _raw(gateway, b"GET /v1/health HTTP/1.1\r\nHost x\r\n\r\n")
    assert response[0] == 400
    _envelope(response, "invalid_request")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b'{"model":"auto","messages":[{"role":"user","content":"a\xffb"}]}', "UTF-8"),
        (b'{"model":"auto","messages":[{"role":"user","content":"\\ud800"}]}', "surrogate"),
        (
            b'{"model":"auto","messages":[{"role":"user","content":"x"}],"model_options":'
            + b'{"a":' * 10_000
            + b"1"
            + b"}" * 10_001,
            "levels",
        ),
        (b'{"model":"auto","messages":[{"role":"user","content":"x"}]', "JSON"),
    ],
    ids=["invalid-utf8", "lone-surrogate", "nested-10000-deep", "truncated"],
)
def test_bad_json_bytes_are_a_400_naming_the_body(
    gateway: GatewayProcess, body: bytes, needle: str
) -> None:
    response = _raw(gateway, _chat_request(gateway, body))
    assert response[0] == 400, response
    error = _envelope(response, "invalid_request")
    assert error["retryable"] is False
    assert error["details"][0]["field"] == "body"
    assert needle in error["details"][0]["message"] + error["message"]


def test_nesting_within_the_limit_is_accepted(gateway: GatewayProcess) -> None:
    options = "{}"
    for _ in range(250):
        options = '{"a":' + options + "}"
    body = (
        '{"model":"sim-chat-1","messages":[{"role":"user","content":"x"}],'
        f'"model_options":{{"sim":{options}}}}}'
    )
    response = _raw(gateway, _chat_request(gateway, body.encode()))
    assert response[0] in (200, 400), response
    if response[0] == 400:  # the options namespace may be refused, never the nesting
        assert "levels" not in response[2].decode()


def test_two_authorization_headers_are_refused(gateway: GatewayProcess) -> None:
    body = b'{"model":"auto","messages":[{"role":"user","content":"hi"}]}'
    request = _chat_request(gateway, body, f"Authorization: Bearer {gateway.api_key}")
    response = _raw(gateway, request)
    assert response[0] == 401
    assert "one Authorization" in _envelope(response, "invalid_api_key")["message"]


@pytest.mark.parametrize("content_type", ["application/jsonx", "text/plain", "application/json-"])
def test_a_content_type_that_is_not_json_is_415(gateway: GatewayProcess, content_type: str) -> None:
    response = httpx.post(
        f"{gateway.base_url}/chat/completions",
        content=b'{"model":"auto","messages":[{"role":"user","content":"hi"}]}',
        headers={"Authorization": f"Bearer {gateway.api_key}", "Content-Type": content_type},
    )
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_json_with_a_charset_is_fine(gateway: GatewayProcess) -> None:
    response = httpx.post(
        f"{gateway.base_url}/chat/completions",
        content=b'{"model":"auto","messages":[{"role":"user","content":"hi"}]}',
        headers={
            "Authorization": f"Bearer {gateway.api_key}",
            "Content-Type": "Application/JSON; charset=utf-8",
        },
    )
    assert response.status_code == 200, response.text


def test_the_gateway_still_serves_after_all_that(gateway: GatewayProcess, tmp_path: Path) -> None:
    assert httpx.get(f"{gateway.base_url}/health").json()["status"] == "ok"
