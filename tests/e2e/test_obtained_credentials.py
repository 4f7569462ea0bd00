"""Credentials the adapters obtain while the gateway runs never leave it: a gateway process in
front of fakes (over real HTTP) that quote what they were sent in their error bodies, as a
proxy or a verbose endpoint may. Vertex's access token and its service account's signed JWT
assertion, Entra ID's token and client secret, Bedrock's access key id and session token (from
the container credentials endpoint), and that endpoint's own token: none reaches the client's
error, the log (`upstream_failed`) or `/metrics`; each is `[redacted]` where it was quoted.

Only the configured key and `extra_headers` used to be masked: a 400 quoting the request's
headers reached the client as "The model rejected the request: ... Authorization=Bearer ..."
with the live token, and the log carried the client secret a failing token endpoint echoed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.aws_metadata import FakeAwsMetadata
from tests.fakes.azure_upstream import FakeAzure
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.vertex_upstream import FakeVertex, ServiceAccountKey
from tests.support.gateway_process import GatewayProcess, client_for, start_gateway

KEY = ServiceAccountKey.generate()
CLIENT_SECRET = "entra-obtained-client-secret-77"
CONTAINER_TOKEN = "container-authorization-token-0042"
AWS_KEY = ("AKIDFROMCONTAINER01", "container-secret-access-key-01", "container-session-token-01")
MASK = "[redacted]"
CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.vertex]
kind = "vertex"
project = "test-project"
location = "europe-west4"
base_url = "{vertex}"
credentials_file = "{key_file}"
token_url = "{token_url}"
timeout_seconds = 5

[providers.entra]
kind = "azure_openai"
base_url = "{azure}"
api = "v1"
timeout_seconds = 5

[providers.entra.entra]
tenant_id = "contoso-tenant"
client_id = "gateway-app"
client_secret_env = "OBTAINED_TEST_CLIENT_SECRET"
token_url = "{azure}/contoso-tenant/oauth2/v2.0/token"

[providers.bedrock]
kind = "bedrock"
region = "us-east-1"
base_url = "{bedrock}"
timeout_seconds = 10

[providers.bedrock_b]
kind = "bedrock"
region = "us-east-1"
base_url = "{bedrock}"
timeout_seconds = 10

{models}
[tenants.default]
"""
MODEL = """
[[models]]
id = "{id}"
provider = "{provider}"
upstream_model = "{upstream}"
capability = "chat"
max_output_tokens = 50
pricing = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 1 }}
"""
MODELS = {
    "gem-vertex": ("vertex", "gemini-2.5-flash"),
    "gpt-entra": ("entra", "gpt4o"),
    "claude-bedrock": ("bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0"),
    "claude-bedrock-b": ("bedrock_b", "anthropic.claude-sonnet-4-5-20250929-v1:0"),
}


class Fakes:
    def __init__(self) -> None:
        self.vertex = FakeVertex(KEY)
        self.azure = FakeAzure(entra=("gateway-app", CLIENT_SECRET))
        self.bedrock = FakeBedrock(credentials=AWS_KEY)
        self.metadata = FakeAwsMetadata([AWS_KEY], authorization=CONTAINER_TOKEN)


@pytest.fixture(scope="module")
def fakes() -> Iterator[Fakes]:
    made = Fakes()
    stops = [
        fake.start_in_thread()[1] for fake in (made.vertex, made.azure, made.bedrock, made.metadata)
    ]
    yield made
    for stop in stops:
        stop()


@pytest.fixture(scope="module")
def gateway(fakes: Fakes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-obtained")
    key_file = workdir / "service-account.json"
    key_file.write_text(json.dumps(KEY.info()))
    (workdir / "aws-credentials").write_text("")  # no profile: the container endpoint's keys
    (workdir / "aws-config").write_text("")
    models = "".join(
        MODEL.format(id=name, provider=provider, upstream=upstream)
        for name, (provider, upstream) in MODELS.items()
    )
    config = CONFIG.format(
        vertex=fakes.vertex.base_url,
        key_file=key_file,
        token_url=fakes.vertex.token_url,
        azure=fakes.azure.base_url,
        bedrock=fakes.bedrock.base_url,
        models=models,
    )
    env = {
        "OBTAINED_TEST_CLIENT_SECRET": CLIENT_SECRET,
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": fakes.metadata.container_url,
        "AWS_CONTAINER_AUTHORIZATION_TOKEN": CONTAINER_TOKEN,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_SHARED_CREDENTIALS_FILE": str(workdir / "aws-credentials"),
        "AWS_CONFIG_FILE": str(workdir / "aws-config"),
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_SESSION_TOKEN": "",
    }
    process = start_gateway(workdir, config, extra_env=env)
    yield process
    process.stop()


def _chat(gateway: GatewayProcess, model: str) -> httpx.Response:
    assert gateway.api_key is not None
    with client_for(gateway, gateway.api_key) as client:
        return client.post(
            "/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "Hello"}]},
        )


def _failures(gateway: GatewayProcess, model: str) -> list[dict[str, Any]]:
    return [
        record
        for record in gateway.log_records()
        if record.get("event") == "upstream_failed" and record.get("model") == model
    ]


def _assert_nowhere(gateway: GatewayProcess, answer: httpx.Response, *secrets: str) -> None:
    """Not in the client's answer, the log or `/metrics`."""
    metrics = httpx.get(f"{gateway.base_url.removesuffix('/v1')}/metrics", timeout=5).text
    logs = gateway.logs()
    for secret in secrets:
        assert secret not in answer.text
        assert secret not in logs
        assert secret not in metrics


def test_vertex_signed_jwt_and_access_token(gateway: GatewayProcess, fakes: Fakes) -> None:
    vertex = fakes.vertex
    vertex.echo_grants = True
    try:
        answer = _chat(gateway, "gem-vertex")
    finally:
        vertex.echo_grants = False
    assert answer.status_code == 502
    assertion = vertex.token_requests[-1].form["assertion"]
    detail = _failures(gateway, "gem-vertex")[-1]["detail"]
    assert f"assertion={MASK}" in detail  # the endpoint quoted the JWT: masked in the log
    _assert_nowhere(gateway, answer, assertion)

    vertex.echo_headers = True
    try:
        answer = _chat(gateway, "gem-vertex")
    finally:
        vertex.echo_headers = False
    token = f"ya29.fake-{vertex.tokens_issued}"
    assert answer.status_code == 400
    assert f"Authorization=Bearer {MASK}" in answer.json()["error"]["message"]
    _assert_nowhere(gateway, answer, token, assertion)
    assert _chat(gateway, "gem-vertex").status_code == 200


def test_entra_client_secret_and_token(gateway: GatewayProcess, fakes: Fakes) -> None:
    azure = fakes.azure
    azure.echo_grants = True
    try:
        answer = _chat(gateway, "gpt-entra")
    finally:
        azure.echo_grants = False
    assert answer.status_code == 502
    assert f"client_secret={MASK}" in _failures(gateway, "gpt-entra")[-1]["detail"]
    _assert_nowhere(gateway, answer, CLIENT_SECRET)

    azure.echo_headers = True
    try:
        answer = _chat(gateway, "gpt-entra")
    finally:
        azure.echo_headers = False
    assert answer.status_code == 400
    assert f"Authorization=Bearer {MASK}" in answer.json()["error"]["message"]
    assert azure.tokens_issued >= 1
    _assert_nowhere(gateway, answer, "eyJ0eXAi.fake-entra-1", CLIENT_SECRET)


def test_bedrock_access_key_id_and_session_token(gateway: GatewayProcess, fakes: Fakes) -> None:
    fakes.bedrock.echo_headers = True
    try:
        answer = _chat(gateway, "claude-bedrock")
    finally:
        fakes.bedrock.echo_headers = False
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert f"Credential={MASK}/" in message and f"X-Amz-Security-Token={MASK}" in message
    assert fakes.metadata.container_requests >= 1  # the keys came from the container endpoint
    _assert_nowhere(gateway, answer, *AWS_KEY)


def test_the_container_endpoints_token(gateway: GatewayProcess, fakes: Fakes) -> None:
    """A provider whose credential chain has not run yet meets a container endpoint that
    quotes the token it was sent."""
    fakes.metadata.echo = True
    try:
        answer = _chat(gateway, "claude-bedrock-b")
    finally:
        fakes.metadata.echo = False
    assert answer.status_code == 502
    assert MASK in _failures(gateway, "claude-bedrock-b")[-1]["detail"]
    _assert_nowhere(gateway, answer, CONTAINER_TOKEN, *AWS_KEY)
