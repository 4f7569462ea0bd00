"""The gateway in front of an OpenAI-compatible upstream (a fake one, over real HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.fakes.openai_upstream import FakeOpenAI, Reply, StreamReply
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.waiting import wait_until

CONFIG = """
[gateway]
starting_grant_credits = 1000

[providers.up]
kind = "openai"
base_url = "{base_url}"
api_key = "sk-upstream-secret"
timeout_seconds = 2
stream_read_timeout_seconds = 2

[[models]]
id = "up-chat"
provider = "up"
upstream_model = "fake-model"
capability = "chat"
owned_by = "upstream"
markup = 1000
max_output_tokens = 100
options_namespace = "up"
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[routing.auto]
chat = ["up-chat"]

[tenants.default]
"""
MESSAGES = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    upstream: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-up")
    process = start_gateway(workdir, CONFIG.format(base_url=upstream.base_url))
    yield process
    process.stop()


@pytest.fixture
def client(gateway: GatewayProcess, upstream: FakeOpenAI) -> Iterator[openai.OpenAI]:
    upstream.requests.clear()
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


def test_what_the_upstream_receives(client: openai.OpenAI, upstream: FakeOpenAI) -> None:
    client.chat.completions.create(
        model="auto",
        messages=MESSAGES,
        max_tokens=20,
        temperature=0.2,
        extra_body={"model_options": {"up": {"top_k": 3}}},
    )
    sent = upstream.requests[-1]
    assert sent.headers["authorization"] == "Bearer sk-upstream-secret"
    assert sent.json["model"] == "fake-model"
    assert sent.json["max_completion_tokens"] == 20
    assert "max_tokens" not in sent.json and "model_options" not in sent.json
    assert sent.json["top_k"] == 3  # the model's own namespace, merged into the body
    assert sent.json["temperature"] == 0.2
    client.chat.completions.create(model="up-chat", messages=MESSAGES, stream=True).close()
    streamed = upstream.requests[-1].json
    assert streamed["stream"] is True
    assert streamed["stream_options"] == {"include_usage": True}
    assert streamed["max_completion_tokens"] == 100


def test_every_documented_field_is_passed_through(
    client: openai.OpenAI, upstream: FakeOpenAI
) -> None:
    body = {
        "id": "chatcmpl-upstream",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "fake-model",
        "system_fingerprint": "fp_x",
        "service_tier": "default",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "reasoning_content": "thinking...",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": 1}'},
                        }
                    ],
                },
                "logprobs": {
                    "content": [{"token": "a", "logprob": -0.1, "bytes": [97], "top_logprobs": []}],
                    "refusal": None,
                },
            }
        ],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 3,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
    }
    upstream.enqueue(Reply(body=body))
    completion = client.chat.completions.create(model="up-chat", messages=MESSAGES)
    assert completion.id.startswith("chatcmpl_") and completion.model == "up-chat"
    assert completion.system_fingerprint == "fp_x" and completion.service_tier == "default"
    message = completion.choices[0].message
    assert message.tool_calls is not None
    assert message.tool_calls[0].function.arguments == '{"q": 1}'
    assert (message.model_extra or {})["reasoning_content"] == "thinking..."
    assert completion.choices[0].logprobs is not None
    assert completion.choices[0].logprobs.content is not None
    assert completion.choices[0].logprobs.content[0].bytes == [97]
    usage = completion.usage
    assert usage is not None and usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 3
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 4
    # (10 x 5 + 5 x 15) / 1e6 USD x 1000 credits per USD; no cached price configured
    assert (usage.model_extra or {})["credits"] == "0.1250"


@pytest.mark.parametrize(
    ("reply", "status", "code"),
    [
        (Reply.error(500, "boom", type="server_error"), 502, "upstream_error"),
        (Reply.error(429, "slow down", type="rate_limit_error"), 503, "model_unavailable"),
        (Reply.error(503, "overloaded", type="server_error"), 503, "model_unavailable"),
        (Reply(delay=3.0), 504, "upstream_timeout"),
        (Reply(body=b"not json"), 502, "upstream_error"),
        (Reply.error(401, "bad upstream key", type="auth_error"), 502, "upstream_error"),
    ],
)
def test_upstream_failures_become_envelopes(
    gateway: GatewayProcess, upstream: FakeOpenAI, reply: Reply, status: int, code: str
) -> None:
    upstream.enqueue(reply)
    response = httpx.post(
        f"{gateway.base_url}/chat/completions",
        json={"model": "up-chat", "messages": MESSAGES},
        headers={"Authorization": f"Bearer {gateway.api_key}"},
        timeout=10,
    )
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and error["retryable"] is True
    assert "sk-upstream-secret" not in response.text
    assert "bad upstream key" not in response.text


def test_upstream_rejection_is_a_client_error(client: openai.OpenAI, upstream: FakeOpenAI) -> None:
    upstream.enqueue(Reply.error(400, "unsupported parameter: seed"))
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="up-chat", messages=MESSAGES, seed=1)
    assert "unsupported parameter" in caught.value.message


def test_stream_broken_off_by_the_upstream(
    client: openai.OpenAI, upstream: FakeOpenAI, gateway: GatewayProcess
) -> None:
    before = _ledger_size(gateway)
    upstream.enqueue(StreamReply(break_after=3))
    stream = client.chat.completions.create(model="up-chat", messages=MESSAGES, stream=True)
    contents: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in stream:
            contents += [c.delta.content or "" for c in chunk.choices]
    assert 1 <= len(contents) <= 3
    assert _ledger_size(gateway) == before + 1  # what was produced is charged, once


def test_client_disconnect_cancels_the_upstream_request(
    gateway: GatewayProcess, upstream: FakeOpenAI
) -> None:
    seen_before = upstream.disconnects
    upstream.enqueue(StreamReply(chunk_delay=0.2))
    with httpx.stream(
        "POST",
        f"{gateway.base_url}/chat/completions",
        json={"model": "up-chat", "messages": MESSAGES, "stream": True},
        headers={"Authorization": f"Bearer {gateway.api_key}"},
        timeout=10,
    ) as response:
        for line in response.iter_lines():
            if '"content":"Hello' in line:
                break
    wait_until(
        lambda: upstream.disconnects != seen_before, timeout=5, what="the upstream disconnect"
    )
    assert upstream.disconnects == seen_before + 1


def test_logs_are_json_and_never_carry_keys(gateway: GatewayProcess) -> None:
    import json

    lines = [line for line in gateway.logs().splitlines() if line.startswith("{")]
    assert lines
    records = [json.loads(line) for line in lines]
    requests = [r for r in records if r.get("event") == "request"]
    assert requests and all(
        {"request_id", "tenant", "route", "model", "status", "latency_ms"} <= r.keys()
        for r in requests
    )
    assert gateway.api_key is not None
    assert all(gateway.api_key not in line and "sk-upstream-secret" not in line for line in lines)


def _ledger_size(gateway: GatewayProcess) -> int:
    page = httpx.get(
        f"{gateway.base_url}/wallet/ledger",
        params={"limit": "100"},
        headers={"Authorization": f"Bearer {gateway.api_key}"},
    ).json()
    return len(page["data"])


def test_stream_failing_before_the_gateway_sent_anything_is_a_json_error(
    client: openai.OpenAI, upstream: FakeOpenAI, gateway: GatewayProcess
) -> None:
    before = _ledger_size(gateway)
    upstream.enqueue(StreamReply(break_after=0))  # headers, then the connection closes
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="up-chat", messages=MESSAGES, stream=True)
    assert caught.value.response.headers["content-type"].startswith("application/json")
    assert caught.value.code == "upstream_error"
    assert _ledger_size(gateway) == before  # released: nothing reached the client
