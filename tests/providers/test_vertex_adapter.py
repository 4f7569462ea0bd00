"""Gemini on Vertex AI: its URLs, its OAuth credentials (a service account's JWT verified by the
fake token endpoint with the key's public half, authorized-user refresh tokens, the metadata
server), tokens renewed before expiry, and answers recorded from Vertex through the Gemini
adapter's translation."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from providers.base import ChatProvider
from providers.errors import ProviderError, UpstreamRejectedRequest, UpstreamUnavailable
from providers.gemini.errors import error_for_gemini_response
from providers.secrets import SecretSink
from providers.tokens import REFRESH_MARGIN
from providers.upstream import Upstream
from providers.vertex import Options, create
from providers.vertex.client import VertexProvider
from providers.vertex.credentials import google_signer
from tests.fakes.recorded import gemini_frames, load
from tests.fakes.vertex_upstream import (
    FakeVertex,
    Reply,
    ServiceAccountKey,
    StreamReply,
    candidate,
    response,
    text,
)
from tests.providers.adapter_checks import drain, run
from tests.support.clock import Clock

KEY = ServiceAccountKey.generate()
BODY: dict[str, Any] = {
    "model": "gemini-2.5-flash",
    "messages": [{"role": "user", "content": "Why is the sky blue?"}],
    "max_completion_tokens": 256,
}
STREAM_BODY = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
PATH = "/v1/projects/test-project/locations/us-central1/publishers/google/models/gemini-2.5-flash"


@pytest.fixture
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The service account's key file, made by the test; no other Google credentials."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    path = tmp_path / "key.json"
    path.write_text(json.dumps(KEY.info()))
    return path


@asynccontextmanager
async def vertex(
    credentials: Path | None, **options: Any
) -> AsyncIterator[tuple[FakeVertex, ChatProvider]]:
    async with FakeVertex(KEY) as fake:
        provider = create(
            "vertex",
            Options(
                base_url=fake.base_url,
                project="test-project",
                location="us-central1",
                credentials_file=str(credentials) if credentials else None,
                token_url=fake.token_url,
                metadata_url=fake.metadata_url,
                **options,
            ),
        )
        try:
            yield fake, provider
        finally:
            await provider.close()


def test_a_service_account_jwt_is_verified_and_its_token_reused(key_file: Path) -> None:
    async def test() -> None:
        async with vertex(key_file) as (fake, provider):
            await provider.complete(BODY)
            stream = await provider.stream(STREAM_BODY)
            await drain(stream, [])
            await stream.aclose()
            await provider.complete(BODY)
        assert [r.path for r in fake.requests] == [
            PATH + ":generateContent",
            PATH + ":streamGenerateContent?alt=sse",
            PATH + ":generateContent",
        ]
        assert fake.tokens_issued == 1  # one exchange for three calls
        (exchange,) = fake.token_requests
        assert exchange.refused is None and exchange.claims is not None
        assert exchange.claims["iss"] == KEY.email
        assert exchange.claims["aud"] == fake.token_url
        assert exchange.claims["scope"] == "https://www.googleapis.com/auth/cloud-platform"
        assert exchange.claims["exp"] - exchange.claims["iat"] == 3600
        assert {r.headers["authorization"] for r in fake.requests} == {"Bearer ya29.fake-1"}
        assert fake.unauthorized == 0

    run(test)


def test_a_jwt_signed_with_another_key_is_refused_by_the_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    stranger = ServiceAccountKey(KEY.email, KEY.key_id, ServiceAccountKey.generate().private_key)
    path = tmp_path / "stranger.json"
    path.write_text(json.dumps(stranger.info()))

    async def test() -> None:
        async with vertex(path) as (fake, provider):
            with pytest.raises(ProviderError) as caught:
                await provider.complete(BODY)
        assert "invalid_grant: Invalid JWT Signature." in caught.value.message
        assert fake.requests == []  # no model call without a token

    run(test)


def test_the_token_is_renewed_before_it_expires(key_file: Path) -> None:
    """Moved clock: past the margin before expiry, the next call gets a new token first;
    the old one was never refused by Vertex."""
    clock = Clock(100.0)

    async def test() -> None:
        async with FakeVertex(KEY, expires_in=3600) as fake:
            options = Options(
                base_url=fake.base_url,
                project="test-project",
                location="us-central1",
                credentials_file=str(key_file),
                token_url=fake.token_url,
            )
            signer = google_signer(
                options, credentials_file=str(key_file), token_url=fake.token_url, clock=clock
            )
            upstream = Upstream(
                options,
                {"Content-Type": "application/json"},
                errors=error_for_gemini_response,
                sign=signer,
            )
            provider = VertexProvider("vertex", options, upstream, signer)
            try:
                await provider.complete(BODY)
                clock.advance(3600 - REFRESH_MARGIN - 5)
                await provider.complete(BODY)
                assert fake.tokens_issued == 1
                clock.advance(10)  # within the margin: renewed before use
                await provider.complete(BODY)
            finally:
                await provider.close()
        assert fake.tokens_issued == 2
        tokens = [r.headers["authorization"] for r in fake.requests]
        assert tokens == ["Bearer ya29.fake-1", "Bearer ya29.fake-1", "Bearer ya29.fake-2"]
        assert fake.unauthorized == 0

    run(test)


def test_authorized_user_credentials_from_google_application_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "adc.json"
    user = {
        "type": "authorized_user",
        "client_id": "764086051850-test.apps.googleusercontent.com",
        "client_secret": "d-FL95Q19q7MQmFpd7hHD0Ty",
        "refresh_token": "1//0gtest-refresh-token",
    }
    path.write_text(json.dumps(user))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))

    async def test() -> None:
        async with FakeVertex(
            refresh_tokens={user["refresh_token"]: (user["client_id"], user["client_secret"])}
        ) as fake:
            options = Options(
                base_url=fake.base_url,
                project="test-project",
                location="us-central1",
                token_url=fake.token_url,
            )
            provider = create("vertex", options)
            try:
                await provider.complete(BODY)
            finally:
                await provider.close()
            reported = provider.secrets.values()  # for the gateway to mask
        (exchange,) = fake.token_requests
        assert exchange.form["grant_type"] == "refresh_token" and exchange.refused is None
        assert fake.requests[0].headers["authorization"] == "Bearer ya29.fake-1"
        assert {user["client_secret"], user["refresh_token"], "ya29.fake-1"} <= reported

    run(test)


def test_the_metadata_server_without_any_credentials_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no gcloud file either

    async def test() -> None:
        async with vertex(None) as (fake, provider):
            await provider.complete(BODY)
        (asked,) = fake.token_requests
        assert asked.path.endswith("/service-accounts/default/token")
        assert asked.headers["metadata-flavor"] == "Google"
        assert fake.requests[0].headers["authorization"] == "Bearer ya29.fake-1"

    run(test)


def test_the_global_location_and_other_models_paths() -> None:
    options = Options(project="p-1", location="global", credentials_file="/nonexistent")
    assert options.api_root() == "https://aiplatform.googleapis.com/v1"
    assert Options(project="p-1", location="europe-west4").api_root() == (
        "https://europe-west4-aiplatform.googleapis.com/v1"
    )


def test_a_tuned_model_endpoint_is_used_as_it_is(key_file: Path) -> None:
    async def test() -> None:
        async with vertex(key_file) as (fake, provider):
            fake.enqueue(Reply())
            await provider.complete({**BODY, "model": "endpoints/1234567890"})
        assert fake.requests[0].path == (
            "/v1/projects/test-project/locations/us-central1/endpoints/1234567890:generateContent"
        )

    run(test)


def test_recorded_implicit_caching_and_image_tokens(key_file: Path) -> None:
    cached = load("vertex_implicit_caching")["body"]
    image_usage = load("vertex_image_output_usage")["usageMetadata"]

    async def test() -> None:
        async with vertex(key_file) as (fake, provider):
            fake.enqueue(Reply(body=cached))
            completion = await provider.complete(BODY)
            fake.enqueue(
                Reply(body=response(candidate(text("A picture.")), usage_metadata=image_usage))
            )
            pictured = await provider.complete(BODY)
        assert completion.body["choices"][0]["message"]["content"] == (
            "Red Riding Hood is looking for **directions** in the forest."
        )
        used = completion.usage
        assert (used.prompt_tokens, used.completion_tokens, used.cached_tokens) == (
            12013,
            88,
            11243,
        )
        assert completion.body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 73}
        details = pictured.body["usage"]["completion_tokens_details"]
        assert details == {"reasoning_tokens": 0, "image_tokens": 258}
        assert pictured.usage.completion_tokens == 258

    run(test)


def test_recorded_parallel_calls_get_ids(key_file: Path) -> None:
    recorded = load("vertex_parallel_calls")["body"]

    async def test() -> None:
        async with vertex(key_file) as (fake, provider):
            fake.enqueue(Reply(body=recorded))
            completion = await provider.complete(BODY)
        message = completion.body["choices"][0]["message"]
        assert [c["function"]["name"] for c in message["tool_calls"]] == [
            "sum",
            "multiply",
            "subtract",
        ]
        assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [
            {"y": 1, "x": 2},
            {"y": 3, "x": 4},
            {"y": 5, "x": 6},
        ]
        assert completion.body["choices"][0]["finish_reason"] == "tool_calls"

    run(test)


def test_recorded_thinking_stream(key_file: Path) -> None:
    events = gemini_frames(load("vertex_thinking_stream")["events"])

    async def test() -> None:
        async with vertex(key_file, include_thoughts=True) as (fake, provider):
            fake.enqueue(StreamReply(events=events))
            stream = await provider.stream({**STREAM_BODY, "reasoning_effort": "low"})
            chunks: list[dict[str, Any]] = []
            await drain(stream, chunks)
            await stream.aclose()
        sent = fake.requests[0].json["generationConfig"]["thinkingConfig"]
        assert sent == {"thinkingBudget": 1024, "includeThoughts": True}
        deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
        reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
        content = "".join(d.get("content") or "" for d in deltas)
        assert reasoning.startswith("**Understanding the Core Question**")
        assert content.startswith("The sky is blue due to a phenomenon called **Rayleigh")
        assert content.endswith("our eyes are more sensitive to blue).")
        assert chunks[-1]["usage"]["completion_tokens"] == 134 + 1067

    run(test)


@pytest.mark.parametrize(
    ("reply", "error", "words"),
    [
        (
            Reply(status=403, body=load("vertex_permission_denied")["body"]),
            ProviderError,
            "aiplatform.endpoints.predict",
        ),
        (
            Reply.error(429, "RESOURCE_EXHAUSTED", "Resource exhausted. Please try again later."),
            UpstreamUnavailable,
            "Resource exhausted",
        ),
        (
            Reply.error(400, "INVALID_ARGUMENT", "Unable to submit request"),
            UpstreamRejectedRequest,
            "Unable to submit",
        ),
    ],
)
def test_vertex_errors_through_the_gemini_table(
    key_file: Path, reply: Reply, error: type[ProviderError], words: str
) -> None:
    async def test() -> None:
        async with vertex(key_file) as (fake, provider):
            fake.enqueue(reply)
            with pytest.raises(ProviderError) as caught:
                await provider.complete(BODY)
        assert type(caught.value) is error and words in caught.value.message

    run(test)


@asynccontextmanager
async def clocked_vertex(
    key_file: Path, clock: Clock
) -> AsyncIterator[tuple[FakeVertex, VertexProvider, SecretSink]]:
    """The adapter as `create` builds it, with its tokens on `clock`."""
    async with FakeVertex(KEY) as fake:
        options = Options(
            base_url=fake.base_url,
            project="test-project",
            location="us-central1",
            credentials_file=str(key_file),
            token_url=fake.token_url,
        )
        secrets = SecretSink()
        signer = google_signer(
            options,
            credentials_file=str(key_file),
            token_url=fake.token_url,
            clock=clock,
            secrets=secrets,
        )
        upstream = Upstream(
            options,
            {"Content-Type": "application/json"},
            errors=error_for_gemini_response,
            sign=signer,
            secrets=secrets,
        )
        provider = VertexProvider("vertex", options, upstream, signer)
        try:
            yield fake, provider, secrets
        finally:
            await provider.close()


def test_a_revoked_token_is_dropped_and_the_call_sent_once_more(key_file: Path) -> None:
    """Vertex answers 401 to a token it no longer takes (revoked, long before the gateway's
    renewal ~55 minutes on): the token is dropped, a new one fetched, the call sent again;
    whole answers and streams alike."""
    clock = Clock(100.0)

    async def test() -> None:
        async with clocked_vertex(key_file, clock) as (fake, provider, _):
            await provider.complete(BODY)
            clock.advance(60)
            fake.expire_all()
            completion = await provider.complete(BODY)
            assert completion.body["choices"][0]["message"]["content"] == fake.text
            assert (fake.tokens_issued, fake.unauthorized) == (2, 1)
            clock.advance(60)
            fake.expire_all()
            chunks: list[dict[str, Any]] = []
            await drain(await provider.stream(STREAM_BODY), chunks)
            assert chunks and (fake.tokens_issued, fake.unauthorized) == (3, 2)
            await provider.complete(BODY)  # the new token serves the calls after
        tokens = [r.headers["authorization"] for r in fake.requests]  # the answered calls
        assert tokens == ["Bearer ya29.fake-1", "Bearer ya29.fake-2"] + ["Bearer ya29.fake-3"] * 2

    run(test)


def test_a_token_refused_again_is_the_credentials_error_after_one_retry(key_file: Path) -> None:
    """A 401 to the new token too: the call fails after its one retry (no loop), and a token
    refused within seconds of its fetch is kept: the credential itself is refused, and
    fetching more would cost the token endpoint an exchange per call."""
    clock = Clock(100.0)

    async def test() -> None:
        async with clocked_vertex(key_file, clock) as (fake, provider, _):
            await provider.complete(BODY)
            clock.advance(60)
            fake.refuse_all = True
            with pytest.raises(ProviderError) as caught:
                await provider.complete(BODY)
            assert type(caught.value) is ProviderError and caught.value.upstream_status == 401
            assert "credentials" in caught.value.message
            assert (fake.tokens_issued, fake.unauthorized) == (2, 2)
            with pytest.raises(ProviderError):
                await provider.complete(BODY)  # the fresh token is not dropped again
            assert (fake.tokens_issued, fake.unauthorized) == (2, 3)

    run(test)


def test_other_refusals_keep_the_token(key_file: Path) -> None:
    """Only a 401 drops the token: a 403 or a 400 is about the request or the project."""
    clock = Clock(100.0)

    async def test() -> None:
        async with clocked_vertex(key_file, clock) as (fake, provider, _):
            clock.advance(60)
            fake.enqueue(Reply.error(403, "PERMISSION_DENIED", "Permission denied on resource"))
            with pytest.raises(ProviderError):
                await provider.complete(BODY)
            await provider.complete(BODY)
        assert fake.tokens_issued == 1 and len(fake.requests) == 2

    run(test)


def test_every_credential_the_adapter_holds_or_obtains_is_reported(key_file: Path) -> None:
    """The private key, each signed JWT assertion and each access token, as they come."""
    clock = Clock(100.0)

    async def test() -> None:
        async with clocked_vertex(key_file, clock) as (fake, provider, secrets):
            assert KEY.info()["private_key"].strip() in secrets.values()
            await provider.complete(BODY)
            assertion = fake.token_requests[0].form["assertion"]
            assert {assertion, "ya29.fake-1"} <= secrets.values()
            clock.advance(3600)
            await provider.complete(BODY)
            assert "ya29.fake-2" in secrets.values()

    run(test)


def test_an_unreachable_token_endpoint_is_unavailable(key_file: Path) -> None:
    async def test() -> None:
        async with vertex(key_file) as (fake, provider):
            fake.token_failures.append(503)
            with pytest.raises(UpstreamUnavailable, match="token endpoint answered HTTP 503"):
                await provider.complete(BODY)
            await provider.complete(BODY)  # the next call exchanges again
        assert fake.tokens_issued == 1

    run(test)


def test_a_broken_key_file_is_refused_at_creation(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text(
        json.dumps(
            {
                **KEY.info(),
                "private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            }
        )
    )

    async def test() -> None:
        with pytest.raises(ValueError, match="private_key"):
            create("v", Options(project="p-1", location="us-central1", credentials_file=str(path)))

    run(test)


def _file_body(url: str) -> dict[str, Any]:
    content = [{"type": "text", "text": "?"}, {"type": "image_url", "image_url": {"url": url}}]
    return {**BODY, "messages": [{"role": "user", "content": content}]}


@pytest.mark.parametrize(
    ("prefixes", "url"),
    [
        ((), "gs://bucket/photos/cat.png"),
        ((), "https://storage.googleapis.com/bucket/photos/cat.png"),
        ((), "https://bucket.storage.googleapis.com/photos/cat.png"),
        ((), "https://storage.cloud.google.com/bucket/photos/cat.png"),
        ((), "https://www.googleapis.com/download/storage/v1/b/bucket/o/cat.png?alt=media"),
        ((), "http://example.com/cat.png"),  # public https only
        (("gs://bucket",), "gs://bucket-evil/photos/cat.png"),
        (("gs://bucket/photos/",), "gs://bucket/photos-evil/cat.png"),
        (("gs://bucket/photos/",), "gs://bucket/photos/../private/cat.png"),
        (("gs://bucket/photos/",), "gs://bucket/photos/%2e%2e/private/cat.png"),
        (("gs://bucket/photos/",), "https://storage.googleapis.com/bucket/photos/%2e%2e/x.png"),
        (("gs://bucket/photos/",), "https://storage.googleapis.com/bucket/photos%2F..%2Fx.png"),
    ],
)
def test_a_storage_object_outside_the_prefixes_is_refused_before_sending(
    key_file: Path, prefixes: tuple[str, ...], url: str
) -> None:
    async def test() -> None:
        async with vertex(key_file, allowed_storage_prefixes=prefixes) as (fake, provider):
            for call, body in ((provider.complete, BODY), (provider.stream, STREAM_BODY)):
                with pytest.raises(UpstreamRejectedRequest) as caught:
                    await call({**body, **_file_body(url)})
                assert caught.value.field == "messages[0].content[1].image_url.url"
        assert fake.requests == []

    run(test)


@pytest.mark.parametrize(
    "url",
    [
        "GS://Bucket/photos/cat.png",
        "https://storage.googleapis.com/bucket/photos/cat.png",
        "https://BUCKET.storage.googleapis.com/photos/cat.png",
    ],
)
def test_a_storage_object_under_an_allowed_prefix_is_sent_as_its_gs_uri(
    key_file: Path, url: str
) -> None:
    async def test() -> None:
        async with vertex(key_file, allowed_storage_prefixes=("gs://bucket/photos/",)) as (
            fake,
            provider,
        ):
            await provider.complete(_file_body(url))
        (sent,) = fake.requests
        file_data = sent.json["contents"][0]["parts"][1]["fileData"]
        assert file_data == {"fileUri": "gs://bucket/photos/cat.png", "mimeType": "image/png"}

    run(test)
