"""Replicate's failures as recorded from the real API (`tests/fakes/recorded/`): a failed
prediction keeps Replicate's words and is retryable only when Replicate says the run was
interrupted; error bodies keep their `detail`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from providers.base import MusicRequest
from providers.errors import ProviderError, UpstreamModelFailed, UpstreamRejectedRequest
from providers.replicate import Options, create
from providers.replicate.client import ReplicateProvider
from tests.fakes.recorded import load
from tests.fakes.replicate_upstream import CreateReply, FakeReplicate

FAILED = load("replicate_failed_predictions")
ERRORS = load("replicate_errors")
MODEL = "meta/musicgen:671ac645ce5e552cc63a54a2bbff63fcf798043055d2dac5fc9e36a837eedcfb"


class Control:
    async def checkpoint(self, percent: float, stage: str, message: str = "") -> None:
        return None


@asynccontextmanager
async def replicate() -> AsyncIterator[tuple[FakeReplicate, ReplicateProvider]]:
    async with FakeReplicate() as fake:
        options = Options(base_url=fake.base_url, api_key="r8_secret", poll_interval_seconds=0.01)
        provider = create("musicgen", options)
        try:
            yield fake, provider
        finally:
            await provider.close()


def failed(error: str) -> dict[str, Any]:
    """The recorded prediction object, ended `failed` with `error`."""
    return {**FAILED["prediction"], "status": "failed", "output": None, "error": error}


@pytest.mark.parametrize(
    ("failure", "retryable"),
    [(failure, "interrupted" in failure["error"]) for failure in FAILED["failures"]],
    ids=["interrupted", "worker-died", "out-of-memory"],
)
def test_a_failed_prediction_keeps_replicates_words(
    failure: dict[str, Any], retryable: bool
) -> None:
    async def test() -> None:
        async with replicate() as (fake, provider):
            fake.enqueue(CreateReply(201, failed(failure["error"])))
            with pytest.raises(UpstreamModelFailed) as raised:
                await provider.generate_music(MusicRequest(model=MODEL, prompt="rain"), Control())
            assert raised.value.message == failure["error"][:500]
            assert raised.value.retryable is retryable
            assert fake.canceled == []  # it had ended

    asyncio.run(test())


def test_a_failed_prediction_without_an_error_says_so() -> None:
    async def test() -> None:
        async with replicate() as (fake, provider):
            fake.enqueue(CreateReply(201, failed("")))
            with pytest.raises(UpstreamModelFailed, match="without an error message") as raised:
                await provider.generate_music(MusicRequest(model=MODEL, prompt="rain"), Control())
            assert not raised.value.retryable

    asyncio.run(test())


def test_recorded_error_bodies_keep_their_detail() -> None:
    unauthenticated, not_found = ERRORS["answers"]

    async def test() -> None:
        async with replicate() as (fake, provider):
            fake.enqueue(CreateReply(unauthenticated["status"], unauthenticated["body"]))
            fake.enqueue(CreateReply(not_found["status"], not_found["body"]))
            request = MusicRequest(model=MODEL, prompt="rain")
            with pytest.raises(ProviderError) as refused:
                await provider.generate_music(request, Control())
            # the gateway's own key was refused: not the caller's request, and said as such
            assert type(refused.value) is ProviderError
            assert refused.value.upstream_status == 401
            assert unauthenticated["body"]["detail"] in refused.value.message
            with pytest.raises(UpstreamRejectedRequest) as rejected:
                await provider.generate_music(request, Control())
            assert rejected.value.message == not_found["body"]["detail"]
            assert not rejected.value.retryable

    asyncio.run(test())
