"""The gateway in front of Azure OpenAI (a fake resource over real HTTP, with Entra ID's token
endpoint), driven by the official `openai` SDK, and once by the `anthropic` SDK through
`/v1/messages`: a deployment reached with the `api-key`, another with Entra ID tokens, streams
with Azure's filter results, the content filter's refusal, and a fallback between them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from tests.fakes.azure_upstream import FakeAzure, Reply, StreamReply, azure_error
from tests.fakes.recorded import load
from tests.support.gateway_process import GatewayProcess, start_gateway

API_KEY = "azure-e2e-key-0123456789"
CLIENT_SECRET = "entra-e2e-client-secret"
CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.azure]
kind = "azure_openai"
base_url = "{azure}"
api_version = "2024-10-21"
api_key_env = "AZURE_OPENAI_TEST_KEY"
timeout_seconds = 2
stream_read_timeout_seconds = 2

[providers.azure_entra]
kind = "azure_openai"
base_url = "{azure}"
api = "v1"
timeout_seconds = 2

[providers.azure_entra.entra]
tenant_id = "contoso-tenant"
client_id = "gateway-app"
client_secret_env = "AZURE_TEST_CLIENT_SECRET"
token_url = "{azure}/contoso-tenant/oauth2/v2.0/token"

[[models]]
id = "gpt-4o-azure"
provider = "azure"
upstream_model = "gpt4o-prod"
capability = "chat"
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 2.5, output_usd_per_mtok = 10, \
cached_input_usd_per_mtok = 1.25 }}

[[models]]
id = "gpt-4o-entra"
provider = "azure_entra"
upstream_model = "gpt4o-dr"
capability = "chat"
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 2.5, output_usd_per_mtok = 10 }}

[routing.policies.chat]
candidates = [{{ model = "gpt-4o-azure" }}, {{ model = "gpt-4o-entra" }}]
backoff_ms = 0

[tenants.default]
"""
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeAzure]:
    fake = FakeAzure(api_key=API_KEY, entra=("gateway-app", CLIENT_SECRET))
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    upstream: FakeAzure, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-azure")
    secrets = {"AZURE_OPENAI_TEST_KEY": API_KEY, "AZURE_TEST_CLIENT_SECRET": CLIENT_SECRET}
    process = start_gateway(workdir, CONFIG.format(azure=upstream.base_url), extra_env=secrets)
    yield process
    process.stop()


@pytest.fixture
def client(gateway: GatewayProcess, upstream: FakeAzure) -> Iterator[openai.OpenAI]:
    upstream.requests.clear()
    upstream.calls.clear()
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


def test_a_deployment_with_the_api_key(client: openai.OpenAI, upstream: FakeAzure) -> None:
    completion = client.chat.completions.create(
        model="gpt-4o-azure", messages=MESSAGES, max_tokens=20
    )
    assert completion.choices[0].message.content == upstream.text
    assert upstream.calls == [("deployments", "gpt4o-prod", "2024-10-21")]
    assert upstream.requests[-1].headers["api-key"] == API_KEY


def test_the_v1_api_with_entra_id(client: openai.OpenAI, upstream: FakeAzure) -> None:
    for _ in range(2):
        completion = client.chat.completions.create(model="gpt-4o-entra", messages=MESSAGES)
        assert completion.choices[0].message.content == upstream.text
    assert upstream.calls == [("v1", "gpt4o-dr", None)] * 2
    assert upstream.tokens_issued == 1
    assert {r.headers["authorization"] for r in upstream.requests} == {
        "Bearer eyJ0eXAi.fake-entra-1"
    }
    assert all("api-key" not in r.headers for r in upstream.requests)


def test_the_recorded_stream_with_filter_results(
    client: openai.OpenAI, upstream: FakeAzure
) -> None:
    events = [b"data: " + e.encode() + b"\n\n" for e in load("azure_openai_stream")["events"]]
    upstream.enqueue(StreamReply(chunks=events))
    stream = client.chat.completions.create(
        model="gpt-4o-azure", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert upstream.requests[-1].json["stream_options"] == {"include_usage": True}
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello World"
    final = chunks[-1].usage
    assert final is not None and (final.prompt_tokens, final.completion_tokens) == (15, 5)
    # (15 x 2.5 + 5 x 10) / 1e6 USD x 1000 credits per USD
    assert (final.model_extra or {})["credits"] == "0.0875"


def test_tools_pass_through(client: openai.OpenAI, upstream: FakeAzure) -> None:
    tools: list[ChatCompletionToolParam] = [{"type": "function", "function": {"name": "get_time"}}]
    call = {
        "id": "call_az1",
        "type": "function",
        "function": {"name": "get_time", "arguments": "{}"},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    body = {
        "id": "chatcmpl-az",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35},
    }
    upstream.enqueue(Reply(body=body))
    first = client.chat.completions.create(model="gpt-4o-azure", messages=MESSAGES, tools=tools)
    assert first.choices[0].finish_reason == "tool_calls"
    assistant = first.choices[0].message.model_dump(exclude_none=True)
    client.chat.completions.create(
        model="gpt-4o-azure",
        messages=[
            *MESSAGES,
            cast(ChatCompletionMessageParam, assistant),
            {"role": "tool", "tool_call_id": "call_az1", "content": "12:00"},
        ],
        tools=tools,
    )
    sent = upstream.requests[-1].json
    assert sent["tools"] == tools and sent["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_az1",
        "content": "12:00",
    }


def test_the_content_filter_refusal_is_the_clients_400(
    client: openai.OpenAI, upstream: FakeAzure
) -> None:
    recorded = load("azure_openai_answers")["content_filter"]
    upstream.enqueue(Reply(status=recorded["status"], body=recorded["body"]))
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="gpt-4o-azure", messages=MESSAGES)
    assert caught.value.code == "invalid_request"
    assert "content_filter" in caught.value.message and "violence: medium" in caught.value.message


@pytest.mark.parametrize(
    ("reply", "status", "code"),
    [
        (
            azure_error(429, "429", "Rate limit is exceeded. Try again in 1 seconds."),
            503,
            "model_unavailable",
        ),
        (
            azure_error(404, "DeploymentNotFound", "The API deployment does not exist."),
            502,
            "upstream_error",
        ),
        (
            azure_error(500, "InternalServerError", "The server had an error."),
            502,
            "upstream_error",
        ),
    ],
)
def test_errors_by_kind(
    client: openai.OpenAI, upstream: FakeAzure, reply: Reply, status: int, code: str
) -> None:
    upstream.enqueue(reply)
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="gpt-4o-azure", messages=MESSAGES)
    assert caught.value.status_code == status and caught.value.code == code
    assert API_KEY not in caught.value.response.text


def test_a_rate_limited_deployment_falls_back_to_the_other(
    client: openai.OpenAI, upstream: FakeAzure
) -> None:
    upstream.enqueue(azure_error(429, "429", "Rate limit is exceeded."))
    raw = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    assert raw.parse().choices[0].message.content == upstream.text
    assert raw.headers["x-gateway-model"] == "gpt-4o-entra"
    assert [api for api, _, _ in upstream.calls] == ["deployments", "v1"]


def test_the_messages_api_through_the_translation(
    gateway: GatewayProcess, upstream: FakeAzure
) -> None:
    root = gateway.base_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key=gateway.api_key, max_retries=0) as claude:
        message = claude.messages.create(
            model="gpt-4o-azure", max_tokens=64, messages=[{"role": "user", "content": "Hello"}]
        )
    (block,) = message.content
    assert block.type == "text" and block.text == upstream.text
    assert upstream.calls[-1] == ("deployments", "gpt4o-prod", "2024-10-21")
