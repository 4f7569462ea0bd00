"""How the Bedrock adapter fails: Bedrock's exceptions mapped by cause (as error answers and
as stream events, before and after the first chunk), broken and stalled streams, aclose."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from providers.errors import (
    ProviderError,
    UpstreamModelFailed,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from tests.fakes.bedrock_upstream import (
    Disconnect,
    EventException,
    Reply,
    StreamReply,
    event_message,
    events_for,
)
from tests.fakes.recorded import load
from tests.providers.bedrock_support import BODY, STREAM_BODY, collect, drain, run, upstream

CAUSES = [
    (
        429,
        "ThrottlingException",
        "Too many requests, please wait before trying again.",
        UpstreamUnavailable,
        True,
    ),
    (
        400,
        "ServiceQuotaExceededException",
        "Your request exceeds the service quota.",
        UpstreamUnavailable,
        True,
    ),
    (
        429,
        "ModelNotReadyException",
        "The model is not ready to serve inference requests.",
        UpstreamUnavailable,
        True,
    ),
    (
        503,
        "ServiceUnavailableException",
        "Bedrock is unable to process your request.",
        UpstreamUnavailable,
        True,
    ),
    (400, "ValidationException", "messages.0: content is empty", UpstreamRejectedRequest, False),
    (
        408,
        "ModelTimeoutException",
        "Model has timed out in processing the request.",
        UpstreamTimeout,
        True,
    ),
    (
        424,
        "ModelErrorException",
        "The model produced an invalid sequence.",
        UpstreamModelFailed,
        False,
    ),
    (403, "AccessDeniedException", "You don't have access to the model.", ProviderError, True),
    (
        403,
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
        ProviderError,
        True,
    ),
    (404, "ResourceNotFoundException", "Model not found in this region.", ProviderError, True),
    (500, "InternalServerException", "An internal server error occurred.", ProviderError, True),
]


@pytest.mark.parametrize(("status", "name", "message", "error", "retryable"), CAUSES)
def test_error_answers_by_cause(
    aws_env: pytest.MonkeyPatch,
    status: int,
    name: str,
    message: str,
    error: type[ProviderError],
    retryable: bool,
) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            for call in (provider.complete, provider.stream):
                fake.enqueue(Reply.error(status, name, message, headers={"Retry-After": "3"}))
                with pytest.raises(ProviderError) as caught:
                    await call(BODY)
                assert type(caught.value) is error
                assert message in caught.value.message
                assert caught.value.upstream_status == status
                assert caught.value.retryable is retryable
                if error is UpstreamUnavailable:
                    assert caught.value.retry_after == 3.0

    run(test)


def test_the_recorded_validation_error(aws_env: pytest.MonkeyPatch) -> None:
    recorded = load("bedrock_validation_error")

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(
                Reply(status=recorded["status"], body=recorded["body"], headers=recorded["headers"])
            )
            with pytest.raises(UpstreamRejectedRequest) as caught:
                await provider.complete(BODY)
        assert caught.value.message == recorded["body"]["message"]

    run(test)


def test_an_error_body_without_the_header_is_read_by_its_type(aws_env: pytest.MonkeyPatch) -> None:
    body = {"__type": "com.amazon.coral.service#ThrottlingException", "message": "Rate exceeded"}

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Reply(status=429, body=body))
            with pytest.raises(UpstreamUnavailable, match="Rate exceeded"):
                await provider.complete(BODY)

    run(test)


@pytest.mark.parametrize(
    ("exception", "error"),
    [
        ("throttlingException", UpstreamUnavailable),
        ("serviceUnavailableException", UpstreamUnavailable),
        ("validationException", UpstreamRejectedRequest),
        ("modelStreamErrorException", UpstreamModelFailed),
        ("internalServerException", ProviderError),
    ],
)
def test_an_exception_right_after_message_start_fails_stream_itself(
    aws_env: pytest.MonkeyPatch, exception: str, error: type[ProviderError]
) -> None:
    events: list[Any] = [("messageStart", {"role": "assistant"}), EventException(exception, "boom")]

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=events))
            with pytest.raises(ProviderError) as caught:
                await provider.stream(STREAM_BODY)
        assert type(caught.value) is error
        assert "boom" in caught.value.message

    run(test)


def test_the_recorded_model_stream_error_after_chunks(aws_env: pytest.MonkeyPatch) -> None:
    recorded = base64.b64decode(load("bedrock_model_stream_error")["bodyBase64"])
    events: list[Any] = [*events_for("Partial answer here")[:3], recorded]

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=events))
            stream = await provider.stream(STREAM_BODY)
            chunks: list[dict[str, Any]] = []
            with pytest.raises(UpstreamModelFailed) as caught:
                await drain(stream, chunks)
            await stream.aclose()
        assert [c["choices"][0]["delta"].get("content") for c in chunks] == ["Partial", " answer"]
        assert caught.value.message == "Model Stream Error"
        assert caught.value.retryable  # AWS: "Retry your request."

    run(test)


def test_a_stream_cut_before_message_stop_is_broken(aws_env: pytest.MonkeyPatch) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(break_after=4))
            stream = await provider.stream(STREAM_BODY)
            chunks: list[dict[str, Any]] = []
            with pytest.raises(ProviderError, match="broke off"):
                await drain(stream, chunks)
            await stream.aclose()
        assert len(chunks) == 3

    run(test)


def test_a_stream_cut_inside_a_message_is_broken(aws_env: pytest.MonkeyPatch) -> None:
    whole = b"".join(event_message(kind, payload) for kind, payload in events_for("One two"))

    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(raw=whole[:-5]))
            with pytest.raises(ProviderError, match="inside a message"):
                await collect(provider, STREAM_BODY)

    run(test)


def test_a_stream_that_ends_at_once_fails_stream(aws_env: pytest.MonkeyPatch) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(events=[]))
            with pytest.raises(ProviderError, match="before it finished"):
                await provider.stream(STREAM_BODY)

    run(test)


def test_a_stalled_stream_times_out(aws_env: pytest.MonkeyPatch) -> None:
    async def test() -> None:
        async with upstream(stream_read_timeout_seconds=0.3) as (fake, provider):
            fake.enqueue(StreamReply(stall_after=3))
            stream = await provider.stream(STREAM_BODY)
            with pytest.raises(UpstreamTimeout):
                await drain(stream, [])
            await stream.aclose()

    run(test)


def test_aclose_is_a_disconnect_upstream(aws_env: pytest.MonkeyPatch) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(StreamReply(chunk_delay=0.05))
            stream = await provider.stream(STREAM_BODY)
            await stream.__anext__()
            await stream.aclose()
            await stream.aclose()  # twice is fine
            await fake.wait_for_disconnects(1)

    run(test)


def test_a_dropped_connection_is_a_provider_error(aws_env: pytest.MonkeyPatch) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Disconnect())
            with pytest.raises(ProviderError):
                await provider.complete(BODY)

    run(test)


def test_a_slow_answer_times_out(aws_env: pytest.MonkeyPatch) -> None:
    async def test() -> None:
        async with upstream(timeout_seconds=0.3) as (fake, provider):
            fake.enqueue(Reply(delay=2.0))
            with pytest.raises(UpstreamTimeout):
                await provider.complete(BODY)

    run(test)
