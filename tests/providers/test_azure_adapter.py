"""Azure OpenAI: deployments with `api-version` or the v1 API, the `api-key` header or Entra ID
tokens (client credentials, managed identity), Azure's error bodies and content-filter
results, streams as OpenAI's, all against a real local fake."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from providers.azure_openai import Options, create
from providers.azure_openai.auth import entra_signer
from providers.azure_openai.client import AzureOpenAIProvider
from providers.azure_openai.errors import error_for_azure_response
from providers.azure_openai.options import EntraOptions
from providers.base import ChatProvider
from providers.errors import ProviderError, UpstreamRejectedRequest, UpstreamUnavailable
from providers.openai.errors import not_a_stream
from providers.secrets import SecretSink
from providers.upstream import Upstream
from tests.fakes.azure_upstream import FakeAzure, Reply, StreamReply, azure_error
from tests.fakes.recorded import load
from tests.providers.adapter_checks import drain, run
from tests.support.clock import Clock

BODY: dict[str, Any] = {
    "model": "gpt-4o-prod",
    "messages": [{"role": "user", "content": "Hello"}],
    "max_completion_tokens": 100,
}
STREAM_BODY = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
KEY = "azure-key-0123456789abcdef"


@asynccontextmanager
async def azure(fake: FakeAzure, **options: Any) -> AsyncIterator[ChatProvider]:
    settings: dict[str, Any] = {"api_version": "2024-10-21", "api_key": KEY} | options
    provider = create("azure", Options(base_url=fake.base_url, **settings))
    try:
        yield provider
    finally:
        await provider.close()


async def _collect(provider: ChatProvider, body: dict[str, Any]) -> list[dict[str, Any]]:
    stream = await provider.stream(body)
    chunks: list[dict[str, Any]] = []
    try:
        await drain(stream, chunks)
    finally:
        await stream.aclose()
    return chunks


def test_a_deployment_with_its_api_version_and_key() -> None:
    async def test() -> None:
        async with FakeAzure(api_key=KEY) as fake, azure(fake) as provider:
            completion = await provider.complete(BODY)
            chunks = await _collect(provider, STREAM_BODY)
        assert fake.calls == [("deployments", "gpt-4o-prod", "2024-10-21")] * 2
        assert fake.requests[0].headers["api-key"] == KEY
        assert "authorization" not in fake.requests[0].headers
        assert fake.requests[1].json["stream_options"] == {"include_usage": True}
        assert completion.body["choices"][0]["message"]["content"] == fake.text
        assert chunks[-1]["usage"]["prompt_tokens"] == 12

    run(test)


def test_a_fixed_deployment_and_the_v1_api() -> None:
    async def test() -> None:
        async with FakeAzure(api_key=KEY) as fake:
            async with azure(fake, deployment="shared-4o") as provider:
                await provider.complete(BODY)
            async with azure(fake, api="v1", api_version=None) as provider:
                await provider.complete(BODY)
        assert fake.calls == [
            ("deployments", "shared-4o", "2024-10-21"),
            ("v1", "gpt-4o-prod", None),
        ]

    run(test)


def test_older_api_versions_take_max_tokens() -> None:
    async def test() -> None:
        async with (
            FakeAzure(api_key=KEY) as fake,
            azure(fake, max_tokens_field="max_tokens") as provider,
        ):
            await provider.complete(BODY)
        sent = fake.requests[0].json
        assert sent["max_tokens"] == 100 and "max_completion_tokens" not in sent
        assert BODY["max_completion_tokens"] == 100  # the caller's body is left as it was

    run(test)


def test_entra_client_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_TEST_CLIENT_SECRET", "client-secret-value")

    async def test() -> None:
        async with FakeAzure(entra=("app-id", "client-secret-value")) as fake:
            entra = EntraOptions(
                tenant_id="tenant-1",
                client_id="app-id",
                client_secret_env="AZURE_TEST_CLIENT_SECRET",
                token_url=fake.base_url + "/tenant-1/oauth2/v2.0/token",
            )
            async with azure(fake, api_key=None, entra=entra) as provider:
                await provider.complete(BODY)
                await provider.complete(BODY)
        (asked,) = fake.entra_requests
        assert asked.form == {
            "grant_type": "client_credentials",
            "client_id": "app-id",
            "client_secret": "client-secret-value",
            "scope": "https://cognitiveservices.azure.com/.default",
        }
        assert {r.headers["authorization"] for r in fake.requests} == {
            "Bearer eyJ0eXAi.fake-entra-1"
        }
        assert all("api-key" not in r.headers for r in fake.requests)

    run(test)


def test_a_revoked_entra_token_is_dropped_and_the_call_sent_once_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Azure answers 401 to a token revoked long before its renewal: dropped, a new one
    fetched, the call sent again; the client secret and both tokens are reported."""
    monkeypatch.setenv("AZURE_TEST_CLIENT_SECRET", "client-secret-value")
    clock = Clock(100.0)

    async def test() -> None:
        async with FakeAzure(entra=("app-id", "client-secret-value")) as fake:
            entra = EntraOptions(
                tenant_id="tenant-1",
                client_id="app-id",
                client_secret_env="AZURE_TEST_CLIENT_SECRET",
                token_url=fake.base_url + "/tenant-1/oauth2/v2.0/token",
            )
            options = Options(base_url=fake.base_url, api_version="2024-10-21", entra=entra)
            secrets = SecretSink()
            signer = entra_signer(options, entra, secrets=secrets, clock=clock)
            upstream = Upstream(
                options,
                {"Content-Type": "application/json"},
                errors=error_for_azure_response,
                not_a_stream=not_a_stream,
                sign=signer,
                secrets=secrets,
            )
            provider = AzureOpenAIProvider("azure", options, upstream, signer)
            try:
                await provider.complete(BODY)
                clock.advance(60)
                fake.expire_all()
                await provider.complete(BODY)
                assert (fake.tokens_issued, fake.unauthorized) == (2, 1)
                clock.advance(60)
                fake.expire_all()
                assert await _collect(provider, STREAM_BODY)
                assert (fake.tokens_issued, fake.unauthorized) == (3, 2)
            finally:
                await provider.close()
        assert {
            "client-secret-value",
            "eyJ0eXAi.fake-entra-2",
            "eyJ0eXAi.fake-entra-3",
        } <= secrets.values()

    run(test)


def test_entra_managed_identity() -> None:
    async def test() -> None:
        async with FakeAzure() as fake:
            entra = EntraOptions(
                client_id="uami-1", token_url=fake.base_url + "/metadata/identity/oauth2/token"
            )
            async with azure(fake, api_key=None, entra=entra) as provider:
                await provider.complete(BODY)
        (asked,) = fake.entra_requests
        assert asked.headers["metadata"] == "true"
        assert asked.query == {
            "api-version": "2018-02-01",
            "resource": "https://cognitiveservices.azure.com",
            "client_id": "uami-1",
        }
        assert fake.requests[0].headers["authorization"] == "Bearer eyJ0eXAi.fake-entra-1"

    run(test)


def test_a_wrong_client_secret_is_the_gateways_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_TEST_CLIENT_SECRET", "wrong")

    async def test() -> None:
        async with FakeAzure(entra=("app-id", "right")) as fake:
            entra = EntraOptions(
                tenant_id="t",
                client_id="app-id",
                client_secret_env="AZURE_TEST_CLIENT_SECRET",
                token_url=fake.base_url + "/t/oauth2/v2.0/token",
            )
            async with azure(fake, api_key=None, entra=entra) as provider:
                with pytest.raises(ProviderError) as caught:
                    await provider.complete(BODY)
        assert "invalid_client: AADSTS7000215" in caught.value.message
        assert fake.requests == []

    run(test)


def test_the_recorded_content_filter_refusal_names_the_category() -> None:
    recorded = load("azure_openai_answers")["content_filter"]

    async def test() -> None:
        async with FakeAzure(api_key=KEY) as fake, azure(fake) as provider:
            fake.enqueue(Reply(status=recorded["status"], body=recorded["body"]))
            with pytest.raises(UpstreamRejectedRequest) as caught:
                await provider.complete(BODY)
        message = caught.value.message
        assert message.startswith("content_filter: The response was filtered due to the prompt")
        assert message.endswith("(violence: medium)")
        assert not caught.value.retryable

    run(test)


def test_the_recorded_answer_keeps_its_filter_results() -> None:
    recorded = load("azure_openai_answers")["answer"]

    async def test() -> None:
        async with FakeAzure(api_key=KEY) as fake, azure(fake) as provider:
            fake.enqueue(Reply(body=recorded))
            completion = await provider.complete(BODY)
        assert completion.body["prompt_filter_results"] == recorded["prompt_filter_results"]
        choice = completion.body["choices"][0]
        assert choice["content_filter_results"] == recorded["choices"][0]["content_filter_results"]
        assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (19, 37)

    run(test)


def test_the_recorded_stream_with_filter_results() -> None:
    events = [
        e.encode() if isinstance(e, str) else e for e in load("azure_openai_stream")["events"]
    ]
    framed = [b"data: " + event + b"\n\n" for event in events]

    async def test() -> None:
        async with FakeAzure(api_key=KEY) as fake, azure(fake) as provider:
            fake.enqueue(StreamReply(chunks=framed))
            stream = await provider.stream(STREAM_BODY)
            chunks: list[dict[str, Any]] = []
            await drain(stream, chunks)
            usage = stream.usage
            await stream.aclose()
        assert chunks[0]["prompt_filter_results"][0]["prompt_index"] == 0
        # The asynchronous filter's offsets come after the finish, in a choice without a
        # delta: left out, so every choice a client reads has its delta.
        assert len(chunks) == len(events) - 1
        assert all("delta" in choice for chunk in chunks for choice in chunk["choices"])
        text = "".join(
            (c["choices"][0].get("delta") or {}).get("content") or ""
            for c in chunks
            if c["choices"]
        )
        assert text == "Hello World"
        assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (15, 5)
        assert not usage.partial

    run(test)


@pytest.mark.parametrize(
    ("reply", "error", "status"),
    [
        (
            azure_error(
                404, "DeploymentNotFound", "The API deployment for this resource does not exist."
            ),
            ProviderError,
            404,
        ),
        (
            azure_error(401, "401", "Access denied due to invalid subscription key."),
            ProviderError,
            401,
        ),
        (
            azure_error(
                400, "OperationNotSupported", "The chatCompletion operation does not work."
            ),
            UpstreamRejectedRequest,
            400,
        ),
        (azure_error(500, "InternalServerError", "The server had an error."), ProviderError, 500),
    ],
)
def test_azure_errors(reply: Reply, error: type[ProviderError], status: int) -> None:
    async def test() -> None:
        async with FakeAzure(api_key=KEY) as fake, azure(fake) as provider:
            fake.enqueue(reply)
            with pytest.raises(ProviderError) as caught:
                await provider.complete(BODY)
        assert type(caught.value) is error and caught.value.upstream_status == status
        assert caught.value.retryable is (error is not UpstreamRejectedRequest)

    run(test)


def test_a_rate_limit_waits_as_retry_after_ms_says() -> None:
    limited = Reply(
        status=429,
        body={"error": {"code": "429", "message": "Requests have exceeded token rate limit."}},
        headers={"retry-after": "1", "retry-after-ms": "1500"},
    )

    async def test() -> None:
        async with FakeAzure(api_key=KEY) as fake, azure(fake) as provider:
            fake.enqueue(limited)
            with pytest.raises(UpstreamUnavailable) as caught:
                await provider.complete(BODY)
        assert caught.value.retry_after == 1.5

    run(test)


def test_a_wrong_key_is_answered_401() -> None:
    async def test() -> None:
        async with FakeAzure(api_key="the-real-key") as fake, azure(fake) as provider:
            with pytest.raises(ProviderError) as caught:
                await provider.complete(BODY)
        assert "invalid subscription key" in caught.value.message

    run(test)


def test_an_api_version_too_old_for_stream_usage_reports_none() -> None:
    """A stream that ends without usage (older API versions ignore `stream_options`) reports
    none: the gateway counts what it delivered (gateway.chat.usage)."""

    async def test() -> None:
        async with FakeAzure(api_key=KEY) as fake, azure(fake, stream_options=False) as provider:
            stream = await provider.stream(STREAM_BODY)
            chunks = [chunk async for chunk in stream]
            assert stream.usage is None
        assert "stream_options" not in fake.requests[0].json
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
        assert not any("usage" in chunk for chunk in chunks)

    run(test)
