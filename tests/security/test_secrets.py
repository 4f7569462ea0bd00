"""Canary secrets: a tenant's API key and the gateway's upstream credentials never show up in
what the gateway writes (its log, error bodies, task errors, `/metrics`), even after a workload
made of failures: wrong keys, upstreams whose error bodies quote the credential they were sent,
streams that break with such an error, image tasks that fail with one, validation errors.

The upstream key comes from the environment (`api_key_env`), one more from `extra_headers`;
both reach the fake upstreams (checked, so the canaries are live), and the fakes echo them back
in every failure they are scripted to give.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from gateway.routing.secrets import MASK
from tests.e2e.media_support import root_of, wait_for_task
from tests.fakes.openai_images_upstream import FakeOpenAIImages, ImageReply
from tests.fakes.openai_upstream import FakeOpenAI, Reply, StreamReply, default_chunks
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.waiting import wait_until

PROVIDER_KEY = "sk-canary-provider-7f3d91c2e5a84b06"
HEADER_SECRET = "hdr-canary-secret-52c8e1a7"

CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.up]
kind = "openai"
base_url = "{chat_url}"
api_key_env = "CANARY_PROVIDER_KEY"
extra_headers = {{ "X-Upstream-Token" = "Token {header_secret}" }}
timeout_seconds = 2
stream_read_timeout_seconds = 2

[providers.img]
kind = "openai"
base_url = "{images_url}"
api_key_env = "CANARY_PROVIDER_KEY"
timeout_seconds = 5

[routing.breaker]
failure_threshold = 1000

[[models]]
id = "up-chat"
provider = "up"
upstream_model = "m"
capability = "chat"
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 2 }}

[[models]]
id = "up-image"
provider = "img"
upstream_model = "gpt-image-1"
capabilities = ["text_to_image"]
pricing = {{ credits_per_image = {{ standard = 50, hd = 300 }} }}

[routing.auto]
chat = ["up-chat"]
text_to_image = ["up-image"]

[tenants.default]
[tenants.canary]
"""
_CHAT_LINE = '"route":"/v1/chat/completions"'
CHAT = {"model": "up-chat", "messages": [{"role": "user", "content": "hello"}]}


@dataclass
class Setup:
    gateway: GatewayProcess
    chat: FakeOpenAI
    images: FakeOpenAIImages
    tenant_key: str

    @property
    def root(self) -> str:
        return root_of(self.gateway.base_url)

    def client(self, key: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.root,
            headers={"Authorization": f"Bearer {key or self.tenant_key}"},
            timeout=15,
        )


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    chat, images = FakeOpenAI(), FakeOpenAIImages()
    chat_url, stop_chat = chat.start_in_thread()
    images_url, stop_images = images.start_in_thread()
    try:
        config = CONFIG.format(
            chat_url=chat_url, images_url=images_url, header_secret=HEADER_SECRET
        )
        gateway = start_gateway(tmp_path, config, extra_env={"CANARY_PROVIDER_KEY": PROVIDER_KEY})
        try:
            key = gateway.new_key("canary")
            gateway.grant("canary", "1000")
            yield Setup(gateway, chat, images, key)
        finally:
            gateway.stop()
    finally:
        stop_chat()
        stop_images()


def _echoing(secret: str) -> list[Reply | StreamReply]:
    """Upstream failures that quote `secret`, each a different path through the gateway: six
    for plain calls, then two for streams (refused at once; broken after the first chunks)."""
    first = default_chunks({"model": "m"})[:2]
    return [
        Reply.error(400, f"Invalid request: key {secret} may not set this"),
        Reply.error(401, f"Incorrect API key provided: {secret}"),
        Reply.error(429, f"Rate limit reached for key {secret}"),
        Reply(status=500, body=f"internal error; auth=Bearer {secret}", content_type="text/plain"),
        Reply(status=200, body={"error": {"message": f"the key {secret} was refused"}}),
        Reply(status=422, body={"detail": f"Authorization: Bearer {secret}"}),
        Reply.error(400, f"stream refused: {secret}"),
        StreamReply(chunks=[*first, {"error": {"message": f"stream broke, key {secret}"}}]),
    ]


def _workload(setup: Setup) -> list[str]:
    """Everything the client saw, as text."""
    seen: list[str] = []
    for secret in (PROVIDER_KEY, HEADER_SECRET):
        setup.chat.enqueue(*_echoing(secret))
        with setup.client() as client:
            for _ in range(6):
                seen.append(client.post("/v1/chat/completions", json=CHAT).text)
            for _ in range(2):
                with client.stream(
                    "POST", "/v1/chat/completions", json={**CHAT, "stream": True}
                ) as response:
                    seen.append(response.read().decode())
            setup.images.enqueue(
                ImageReply.error(400, f"your key {secret} may not make this image"),
                ImageReply.error(401, f"Incorrect API key provided: {secret}"),
            )
            for _ in range(2):
                created = client.post(
                    "/v1/images/generations", json={"model": "up-image", "prompt": "a cat"}
                )
                seen.append(created.text)
                task = wait_for_task(client, created.json()["task_id"])
                seen.append(str(task))
    key = setup.tenant_key
    for wrong in (key + "x", key[:-1], key.upper(), key[:12]):
        with setup.client(wrong) as client:
            seen.append(client.post("/v1/chat/completions", json=CHAT).text)
            seen.append(client.get("/v1/tasks").text)
    with httpx.Client(base_url=setup.root, timeout=15) as anonymous:
        for headers in (
            {"Authorization": f"Basic {key}"},
            {"Authorization": f"bearer  {key}"},
            {"Authorization": key},
            {"X-Api-Key": key},
        ):
            seen.append(anonymous.get("/v1/models", headers=headers).text)
        seen.append(anonymous.get("/v1/models", params={"api_key": key}).text)
        seen.append(anonymous.get(f"/v1/artifacts/art_0/content?signature={key}&expires=1").text)
    with setup.client() as client:
        seen.append(client.post("/v1/chat/completions", content=b"{not json").text)
        seen.append(client.post("/v1/chat/completions", json={**CHAT, "bogus": 1}).text)
        seen.append(client.post("/v1/chat/completions", json={**CHAT, "n": "x"}).text)
        seen.append(client.post("/v1/images/generations", json={"prompt": ""}).text)
        seen.append(client.get("/v1/tasks/task_0").text)
    return seen


def _write_ups(setup: Setup) -> tuple[str, str]:
    metrics = httpx.get(f"{setup.root}/metrics", timeout=10).text
    setup.gateway.stop()  # the log is complete (flushed) once the process has exited
    return setup.gateway.logs(), metrics


def test_canary_secrets_never_leave_the_gateway(setup: Setup) -> None:
    seen = _workload(setup)
    # Also in the parts of the requests the client itself chose: the log line and metrics.
    logged_chats = setup.gateway.logs().count(_CHAT_LINE)
    with setup.client() as client:
        client.post("/v1/chat/completions", json={**CHAT, "model": setup.tenant_key})
        client.post("/v1/chat/completions", json={**CHAT, "user": setup.tenant_key})
    wait_until(  # both calls logged (the log line is the last thing a request does)
        lambda: setup.gateway.logs().count(_CHAT_LINE) >= logged_chats + 2,
        what="the two calls in the log",
    )
    logs, metrics = _write_ups(setup)

    # The canaries are live: the upstreams were sent both, and the workload did fail.
    sent = [r.headers for r in setup.chat.requests] + [r.headers for r in setup.images.requests]
    assert all(h.get("authorization") == f"Bearer {PROVIDER_KEY}" for h in sent)
    assert all(h.get("x-upstream-token") == f"Token {HEADER_SECRET}" for h in sent[:6])
    assert "upstream_failed" in logs and "upstream_error" in " ".join(seen)

    for name, secret in (
        ("provider key", PROVIDER_KEY),
        ("extra header", HEADER_SECRET),
        ("tenant key", setup.tenant_key),
    ):
        shown = [text for text in seen if secret in text]
        assert not shown, f"the {name} is in what clients saw: {shown[:2]}"
        assert secret not in metrics, f"the {name} is in /metrics"
        logged = [line for line in logs.splitlines() if secret in line]
        assert not logged, f"the {name} is in the log: {logged[:2]}"
    # Upstream messages are still useful: only the credential is masked.
    assert any(f"Invalid request: key {MASK} may not set this" in text for text in seen)
