"""The api layer and the services on the app factory, in process (beside the end-to-end tests,
which run `gateway serve` as a subprocess): status, headers, JSON, SSE and the envelope, and
the one access-log line each request gets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from tests.api.support import InProcessApp, in_process_app

Scenario = Callable[[InProcessApp], Awaitable[None]]

# Litestar 2.25 deprecates, for 3.0, two things the controllers do (inferred dependencies,
# `Parameter(query=...)`); the subprocess tests never see these warnings, this one would fail.
pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

CHAT = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "Say hello"}]


@pytest.fixture(autouse=True)
def _plain_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    """The factory's logging setup is for a server process; here structlog's default stays, so
    `capture_logs` sees the lines."""
    monkeypatch.setattr("gateway.app.factory.configure_logging", lambda level: None)
    structlog.reset_defaults()


def _run(tmp_path: Path, scenario: Scenario) -> None:
    async def main() -> None:
        async with in_process_app(tmp_path) as gateway:
            await scenario(gateway)

    asyncio.run(main())


def _access(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [line for line in logs if line.get("event") == "request"]


def test_sync_chat_answers_json_with_rate_headers_and_logs_the_model(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        with capture_logs() as logs:
            response = await gw.client.post(
                CHAT,
                json={"model": "auto", "messages": MESSAGES},
                headers=gw.auth() | {"X-Request-Id": "req-sync-1"},
            )
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        assert response.headers["x-request-id"] == "req-sync-1"
        assert response.headers["x-ratelimit-limit-requests"] == "600"
        assert response.headers["x-ratelimit-limit-tokens"] == "1000000"
        body = response.json()
        assert body["object"] == "chat.completion" and body["model"] == "sim-chat-1"
        assert "credits" in body["usage"]
        [line] = _access(logs)
        assert (line["status"], line["model"], line["tenant"]) == (200, "sim-chat-1", "default")
        assert line["replayed"] is None and line["error"] is None

    _run(tmp_path, scenario)


def test_streamed_chat_is_server_sent_events_ending_in_done(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        response = await gw.client.post(
            CHAT,
            json={"model": "sim-chat-pro", "messages": MESSAGES, "stream": True},
            headers=gw.auth(),
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-ratelimit-remaining-requests"]
        events = [line for line in response.text.split("\n\n") if line]
        assert events[-1] == "data: [DONE]"
        chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
        assert {c["model"] for c in chunks} == {"sim-chat-pro"}
        assert len({c["id"] for c in chunks}) == 1

    _run(tmp_path, scenario)


def test_a_repeated_idempotency_key_is_replayed(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        headers = gw.auth() | {"Idempotency-Key": "order-1"}
        request = {"model": "sim-chat-1", "messages": MESSAGES}
        first = await gw.client.post(CHAT, json=request, headers=headers)
        with capture_logs() as logs:
            again = await gw.client.post(CHAT, json=request, headers=headers)
        assert first.status_code == again.status_code == 200
        assert "idempotent-replayed" not in first.headers
        assert again.headers["idempotent-replayed"] == "true"
        assert again.content == first.content
        assert again.headers["x-ratelimit-limit-requests"] == "600"
        [line] = _access(logs)
        assert line["replayed"] is True and line["model"] == "sim-chat-1"
        ledger = await gw.client.get("/v1/wallet/ledger", headers=gw.auth())
        assert [e["kind"] for e in ledger.json()["data"]].count("charge") == 1

    _run(tmp_path, scenario)


def test_errors_are_the_envelope_with_what_the_call_got_to(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        with capture_logs() as logs:
            unknown = await gw.client.post(
                CHAT, json={"model": "nope", "messages": MESSAGES}, headers=gw.auth()
            )
            failed = await gw.client.post(
                CHAT,
                json={
                    "model": "sim-chat-1",
                    "messages": [{"role": "user", "content": "[[sim:fail=503]]"}],
                },
                headers=gw.auth(),
            )
        assert unknown.status_code == 404
        error = unknown.json()["error"]
        assert error["code"] == "model_not_found" and error["type"] == "invalid_request_error"
        assert error["request_id"] == unknown.headers["x-request-id"]
        # Refused before admission, it still took its request: the buckets say so.
        assert unknown.headers["x-ratelimit-remaining-requests"] == "599"
        # Admitted, then the upstream failed: the rate state and the model are still reported.
        assert failed.status_code == 503
        assert failed.json()["error"]["code"] == "model_unavailable"
        assert failed.headers["x-ratelimit-limit-requests"] == "600"
        lines = _access(logs)
        assert [(x["status"], x["model"], x["error"]) for x in lines] == [
            (404, None, "model_not_found"),
            (503, "sim-chat-1", "model_unavailable"),
        ]

    _run(tmp_path, scenario)


def test_rate_limited_chat_carries_retry_after_and_the_buckets(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        key = gw.keys["limited"]
        request = {"model": "sim-chat-1", "messages": MESSAGES}
        ok = await gw.client.post(CHAT, json=request, headers=gw.auth(key))
        with capture_logs() as logs:
            limited = await gw.client.post(CHAT, json=request, headers=gw.auth(key))
        assert ok.status_code == 200
        assert limited.status_code == 429
        assert limited.json()["error"]["code"] == "rate_limited"
        assert limited.headers["retry-after"] == "60"
        assert limited.headers["x-ratelimit-remaining-requests"] == "0"
        [line] = _access(logs)
        assert (line["model"], line["tenant"]) == ("sim-chat-1", "limited")

    _run(tmp_path, scenario)


def test_a_media_create_is_202_with_the_task(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        with capture_logs() as logs:
            response = await gw.client.post(
                "/v1/images/generations",
                json={"model": "auto", "prompt": "a red fox"},
                headers=gw.auth(),
            )
        assert response.status_code == 202, response.text
        task = response.json()
        assert response.headers["location"] == f"/v1/tasks/{task['task_id']}"
        assert task["status"] == "queued" and task["model"] == "auto"
        assert task["resolved_model"] == "image-model-2"
        assert response.headers["x-ratelimit-limit-requests"] == "600"
        assert "x-ratelimit-limit-tokens" not in response.headers
        [line] = _access(logs)
        assert line["model"] == "image-model-2"
        wallet = await gw.client.get("/v1/wallet", headers=gw.auth())
        assert wallet.json()["balance_credits"] == "950.0000"  # prepaid: 50 per image

    _run(tmp_path, scenario)
