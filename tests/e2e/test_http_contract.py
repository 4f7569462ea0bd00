"""Cross-cutting HTTP behaviour: request ids, the envelope everywhere, health, planned paths."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.support.gateway_process import ROOT, GatewayProcess
from tests.support.ports import free_port

CHAT = {"model": "sim-chat-1", "messages": [{"role": "user", "content": "hi"}]}


def auth(gateway: GatewayProcess) -> dict[str, str]:
    return {"Authorization": f"Bearer {gateway.api_key}"}


def assert_envelope(response: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["retryable"], bool)
    assert error["request_id"] == response.headers["x-request-id"]
    return error  # type: ignore[no-any-return]


def test_health_needs_no_key(gateway: GatewayProcess) -> None:
    response = httpx.get(f"{gateway.base_url}/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.headers["x-request-id"].startswith("req_")


def test_client_request_id_is_echoed_when_well_formed(gateway: GatewayProcess) -> None:
    ok = httpx.post(
        f"{gateway.base_url}/chat/completions",
        json=CHAT,
        headers={**auth(gateway), "X-Request-Id": "client-123.abc:def"},
    )
    assert ok.headers["x-request-id"] == "client-123.abc:def"
    bad = httpx.post(
        f"{gateway.base_url}/chat/completions",
        json=CHAT,
        headers={**auth(gateway), "X-Request-Id": "has spaces!"},
    )
    assert bad.headers["x-request-id"].startswith("req_")
    assert len(bad.headers["x-request-id"]) >= 4 + 32


@pytest.mark.parametrize("header", [None, "Basic abc", "Bearer", "Bearer gw-nope"])
def test_missing_or_bad_keys_are_401(gateway: GatewayProcess, header: str | None) -> None:
    headers = {"Authorization": header} if header is not None else {}
    response = httpx.get(f"{gateway.base_url}/models", headers=headers)
    error = assert_envelope(response, 401, "invalid_api_key")
    assert error["retryable"] is False
    assert response.headers["www-authenticate"] == "Bearer"


def test_revoked_key_is_401_at_once(gateway: GatewayProcess) -> None:
    key = gateway.new_key("default")
    headers = {"Authorization": f"Bearer {key}"}
    assert httpx.get(f"{gateway.base_url}/models", headers=headers).status_code == 200
    assert gateway.cli("keys", "revoke", key).stdout.strip() == "revoked"
    assert_envelope(
        httpx.get(f"{gateway.base_url}/models", headers=headers), 401, "invalid_api_key"
    )


def test_unknown_path_and_wrong_method(gateway: GatewayProcess) -> None:
    assert_envelope(httpx.get(f"{gateway.base_url}/nope", headers=auth(gateway)), 404, "not_found")
    assert_envelope(
        httpx.get(f"{gateway.base_url}/chat/completions", headers=auth(gateway)),
        405,
        "method_not_allowed",
    )


def test_planned_endpoints_are_501(gateway: GatewayProcess) -> None:
    response = httpx.post(f"{gateway.base_url}/audio/speech", json={}, headers=auth(gateway))
    error = assert_envelope(response, 501, "not_implemented")
    assert "Planned" in str(error["message"])


def test_non_json_bodies(gateway: GatewayProcess) -> None:
    url = f"{gateway.base_url}/chat/completions"
    assert_envelope(
        httpx.post(
            url, content=b"{not json", headers={**auth(gateway), "Content-Type": "application/json"}
        ),
        400,
        "invalid_request",
    )
    assert_envelope(
        httpx.post(
            url,
            content=b"model=x",
            headers={**auth(gateway), "Content-Type": "application/x-www-form-urlencoded"},
        ),
        415,
        "unsupported_media_type",
    )
    assert_envelope(
        httpx.post(
            url, content=b"[1,2]", headers={**auth(gateway), "Content-Type": "application/json"}
        ),
        400,
        "invalid_request",
    )


def test_rate_limit_headers_on_chat(gateway: GatewayProcess) -> None:
    response = httpx.post(f"{gateway.base_url}/chat/completions", json=CHAT, headers=auth(gateway))
    assert response.status_code == 200
    for name in ("requests", "tokens"):
        assert int(response.headers[f"x-ratelimit-limit-{name}"]) > 0
        assert int(response.headers[f"x-ratelimit-remaining-{name}"]) >= 0
        assert response.headers[f"x-ratelimit-reset-{name}"].endswith("s")
    models = httpx.get(f"{gateway.base_url}/models", headers=auth(gateway))
    assert "x-ratelimit-limit-requests" in models.headers
    assert "x-ratelimit-limit-tokens" not in models.headers


def test_requests_per_minute_limit_gives_429_with_retry_after(gateway: GatewayProcess) -> None:
    headers = {"Authorization": f"Bearer {gateway.new_key('limited')}"}
    statuses = [
        httpx.get(f"{gateway.base_url}/models", headers=headers).status_code for _ in range(3)
    ]
    assert statuses == [200, 200, 200]
    response = httpx.post(f"{gateway.base_url}/chat/completions", json=CHAT, headers=headers)
    error = assert_envelope(response, 429, "rate_limited")
    assert error["retryable"] is True
    assert int(response.headers["retry-after"]) >= 1
    assert response.headers["x-ratelimit-remaining-requests"] == "0"


def test_tokens_per_minute_limit(gateway: GatewayProcess) -> None:
    headers = {"Authorization": f"Bearer {gateway.new_key('tokens')}"}
    gateway.grant("tokens", "100")
    body = {**CHAT, "max_tokens": 250}
    url = f"{gateway.base_url}/chat/completions"
    first = httpx.post(url, json=body, headers=headers)
    assert first.status_code == 200
    assert int(first.headers["x-ratelimit-limit-tokens"]) == 300
    # The first call used far less than it reserved; what is left (about 300 minus its real
    # usage) cannot cover a second reservation of prompt estimate + 250.
    second = httpx.post(url, json=body, headers=headers)
    assert_envelope(second, 429, "rate_limited")
    small = httpx.post(url, json={**CHAT, "max_tokens": 5}, headers=headers)
    assert small.status_code == 200


def test_oversized_body_is_413(gateway: GatewayProcess) -> None:
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * 70_000}]}
    response = httpx.post(f"{gateway.base_url}/chat/completions", json=big, headers=auth(gateway))
    assert_envelope(response, 413, "payload_too_large")


@pytest.mark.parametrize("key", ["k" * 256, "caf\u00e9"])
def test_malformed_idempotency_keys_are_400_on_chat(gateway: GatewayProcess, key: str) -> None:
    response = httpx.post(
        f"{gateway.base_url}/chat/completions",
        json=CHAT,
        headers={**auth(gateway), "Idempotency-Key": key.encode()},  # type: ignore[dict-item]
    )
    error = assert_envelope(response, 400, "invalid_request")
    assert error["details"] == [{"field": "Idempotency-Key", "message": "1 to 255 printable ASCII"}]


def test_a_second_server_on_the_same_sqlite_file_is_refused(gateway: GatewayProcess) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway.app.cli", "serve", "--port", str(free_port())],
        env=gateway.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "another gateway process is serving" in result.stdout + result.stderr
    assert httpx.get(f"{gateway.base_url}/health").status_code == 200
