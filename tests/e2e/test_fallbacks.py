"""Fallbacks and breakers end to end: real `gateway serve` processes in front of three fake
OpenAI-compatible upstreams (real HTTP servers with scripted failures).

An upstream that answers 503, one that times out, one that drops the connection: `auto`
answers from the next within the bound and the headers say why. The breaker opens (the dead
upstream stops receiving requests) and closes again once it recovers. Streams fall back before
their first byte and end with an error event after it. Every client request is charged once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.openai_upstream import Disconnect, FakeOpenAI, Reply, StreamReply
from tests.support.gateway_process import GatewayProcess, start_gateway

CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000
{providers}
[[models]]
id = "a"
provider = "up_a"
upstream_model = "model-a"
capability = "chat"
max_output_tokens = 100
options_namespace = "alpha"
pricing = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 2 }}

[[models]]
id = "b"
provider = "up_b"
upstream_model = "model-b"
capability = "chat"
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[[models]]
id = "c"
provider = "up_c"
upstream_model = "model-c"
capability = "chat"
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 2, output_usd_per_mtok = 4 }}

[routing.policies.chat]
candidates = [{{ model = "a" }}, {{ model = "b" }}, {{ model = "c" }}]
backoff_ms = 10

[routing.breaker]
failure_threshold = 2
open_seconds = 1.5

[tenants.default]
"""
PROVIDER = """
[providers.up_{name}]
kind = "openai"
base_url = "{url}"
api_key = "sk-{name}"
timeout_seconds = 1
stream_read_timeout_seconds = 1
"""
MESSAGES = [{"role": "user", "content": "Hello"}]


@dataclass
class Setup:
    gateway: GatewayProcess
    a: FakeOpenAI
    b: FakeOpenAI
    c: FakeOpenAI

    def post(self, model: str = "auto", **fields: Any) -> httpx.Response:
        return httpx.post(
            f"{self.gateway.base_url}/chat/completions",
            json={"model": model, "messages": MESSAGES, **fields},
            headers=self.auth,
            timeout=15,
        )

    def stream(self, model: str = "auto") -> tuple[httpx.Response, str]:
        body = {"model": model, "messages": MESSAGES, "stream": True}
        url = f"{self.gateway.base_url}/chat/completions"
        with httpx.stream("POST", url, json=body, headers=self.auth, timeout=15) as response:
            return response, "".join(response.iter_text())

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.gateway.api_key}"}

    def charges(self) -> int:
        page = httpx.get(
            f"{self.gateway.base_url}/wallet/ledger",
            params={"limit": "100"},
            headers=self.auth,
            timeout=5,
        ).json()
        return sum(1 for entry in page["data"] if entry["kind"] == "charge")


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    fakes = {name: FakeOpenAI(text=f"Hello from {name}.") for name in "abc"}
    stops = []
    try:
        providers = ""
        for name, fake in fakes.items():
            url, stop = fake.start_in_thread()
            stops.append(stop)
            providers += PROVIDER.format(name=name, url=url)
        gateway = start_gateway(tmp_path, CONFIG.format(providers=providers))
        try:
            yield Setup(gateway, fakes["a"], fakes["b"], fakes["c"])
        finally:
            gateway.stop()
    finally:
        for stop in stops:
            stop()


def _route(response: httpx.Response) -> tuple[str, str]:
    return response.headers["x-gateway-model"], response.headers["x-gateway-route"]


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (Reply.error(503, "overloaded", type="server_error"), "503"),
        (Reply(delay=6.0), "timeout"),
        (Disconnect(), "error"),
    ],
    ids=["503", "timeout", "dropped"],
)
def test_auto_answers_from_the_next_upstream_and_says_why(
    setup: Setup, failure: Reply | Disconnect, reason: str
) -> None:
    setup.a.enqueue(failure)
    started = time.monotonic()
    response = setup.post()
    assert response.status_code == 200, response.text
    assert time.monotonic() - started < 4.5  # the 1 s timeout, then b at once (not a's 6 s)
    assert _route(response) == ("b", f"auto; fallback=b; failed=a:{reason}")
    body = response.json()
    assert body["model"] == "b"
    assert body["choices"][0]["message"]["content"] == "Hello from b."
    assert len(setup.a.requests) == 1 and len(setup.b.requests) == 1
    assert setup.b.requests[0].json["model"] == "model-b"
    assert setup.charges() == 1

    again = setup.post()  # a is well again: picked first
    assert _route(again) == ("a", "auto; picked=a")
    assert setup.charges() == 2


def test_the_breaker_opens_on_a_dead_upstream_and_closes_once_it_recovers(setup: Setup) -> None:
    setup.a.enqueue(*[Reply.error(503, "down", type="server_error")] * 2)
    for _ in range(2):
        assert _route(setup.post()) == ("b", "auto; fallback=b; failed=a:503")
    for _ in range(3):  # open: a receives nothing
        response = setup.post()
        assert _route(response) == ("b", "auto; fallback=b; failed=a:breaker_open")
    assert len(setup.a.requests) == 2

    pinned = setup.post("a")  # a pinned model that is down: 503 at once, without calling it
    assert pinned.status_code == 503
    assert pinned.json()["error"]["code"] == "model_unavailable"
    assert _route(pinned) == ("a", "pinned; failed=a:breaker_open")
    assert 1 <= int(pinned.headers["retry-after"]) <= 2
    assert len(setup.a.requests) == 2

    time.sleep(1.6)  # open_seconds: the next request is the probe, and a answers again
    assert _route(setup.post()) == ("a", "auto; picked=a")
    assert _route(setup.post()) == ("a", "auto; picked=a")
    assert len(setup.a.requests) == 4
    assert setup.charges() == 7  # every answered request once; the refused one not at all


def test_a_pinned_model_whose_upstream_fails_is_503_model_unavailable(setup: Setup) -> None:
    setup.a.enqueue(Reply.error(503, "overloaded", type="server_error"))
    response = setup.post("a")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "model_unavailable" and error["retryable"] is True
    assert _route(response) == ("a", "pinned; failed=a:503")
    assert len(setup.b.requests) == 0 and setup.charges() == 0
    assert _route(setup.post("a")) == ("a", "pinned")


def test_when_every_upstream_fails_the_last_failure_answers_and_nothing_is_charged(
    setup: Setup,
) -> None:
    setup.a.enqueue(Reply.error(503, "overloaded", type="server_error"))
    setup.b.enqueue(Disconnect())
    setup.c.enqueue(Reply.error(502, "bad gateway", type="server_error"))
    response = setup.post()
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_error"
    assert _route(response) == ("c", "auto; failed=a:503,b:error,c:502")
    assert setup.charges() == 0
    wallet = httpx.get(f"{setup.gateway.base_url}/wallet", headers=setup.auth, timeout=5).json()
    assert wallet["held_credits"] == "0.0000"


def test_a_stream_whose_upstream_fails_before_the_first_byte_falls_back(setup: Setup) -> None:
    setup.a.enqueue(Reply.error(503, "overloaded", type="server_error"))
    setup.b.enqueue(StreamReply(break_after=0))  # headers, then the connection closes
    response, text = setup.stream()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert _route(response) == ("c", "auto; fallback=c; failed=a:503,b:error")
    assert '"model":"c"' in text and "Hello from c." not in text  # chunks, word by word
    assert text.endswith("data: [DONE]\n\n")
    assert setup.charges() == 1


def test_a_stream_that_fails_after_its_first_byte_ends_with_an_error_charged_once(
    setup: Setup,
) -> None:
    setup.a.enqueue(StreamReply(break_after=3))
    response, text = setup.stream()
    assert _route(response) == ("a", "auto; picked=a")
    assert '"error"' in text and "[DONE]" not in text
    assert len(setup.b.requests) == 0  # too late to fall back: the client has chunks
    assert setup.charges() == 1


def test_model_options_reach_their_model_s_upstream_only(setup: Setup) -> None:
    setup.a.enqueue(Reply.error(503, "overloaded", type="server_error"))
    response = setup.post(model_options={"alpha": {"top_k": 4}})
    assert _route(response)[0] == "b"
    assert setup.a.requests[0].json["top_k"] == 4
    assert "top_k" not in setup.b.requests[0].json
    assert "model_options" not in setup.b.requests[0].json

    refused = setup.post(model_options={"gamma": {"x": 1}})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "invalid_request" and error["param"] == "model_options.gamma"
    assert len(setup.a.requests) == 1 and len(setup.b.requests) == 1


def test_a_replayed_answer_keeps_its_model_and_route(setup: Setup) -> None:
    setup.a.enqueue(Reply.error(503, "overloaded", type="server_error"))
    headers = {**setup.auth, "Idempotency-Key": "fallback-1"}
    url = f"{setup.gateway.base_url}/chat/completions"
    body = {"model": "auto", "messages": MESSAGES}
    first = httpx.post(url, json=body, headers=headers, timeout=15)
    again = httpx.post(url, json=body, headers=headers, timeout=15)
    assert again.headers["idempotent-replayed"] == "true"
    assert _route(again) == _route(first) == ("b", "auto; fallback=b; failed=a:503")
    assert again.content == first.content
    assert setup.charges() == 1
