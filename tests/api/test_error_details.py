"""Refusals say their problems one way everywhere: each detail names the field as the client
wrote it and the problem in plain words, the message joins them (`field: problem`); chat (400)
and media (422) alike, and a Planned endpoint's 501 tells SDKs not to retry."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.support import InProcessApp, in_process_app

pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]
HINT = "unknown field; model-specific options go in model_options"
NOT_TAKEN = "not supported by this model's upstream"
"""An extension field on chat that the model's upstream (the simulator) does not take."""


def _run(tmp_path: Path, scenario: Callable[[InProcessApp], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with in_process_app(tmp_path) as gateway:
            return await scenario(gateway)

    return asyncio.run(main())


def _refusal(response: httpx.Response) -> tuple[int, str, list[dict[str, str]], str]:
    error = response.json()["error"]
    return response.status_code, error["code"], error["details"], error["message"]


CASES = [
    (
        "/v1/chat/completions",
        {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "colour": "blue"},
        (400, "invalid_request", [{"field": "colour", "message": NOT_TAKEN}]),
    ),
    (
        "/v1/images/generations",
        {"model": "auto", "prompt": "a quay", "colour": "blue"},
        (422, "validation_error", [{"field": "colour", "message": HINT}]),
    ),
    (
        "/v1/images/generations",
        {"model": "auto", "prompt": "a quay", "n": "two"},
        (422, "validation_error", [{"field": "n", "message": "expected an integer, got a string"}]),
    ),
    (
        "/v1/music/text-to-music",
        {"model": "auto", "prompt": "calm piano", "instrumental": "yes"},
        (
            422,
            "validation_error",
            [{"field": "instrumental", "message": "expected a boolean, got a string"}],
        ),
    ),
]


@pytest.mark.parametrize(("path", "body", "expected"), CASES, ids=[c[0] for c in CASES])
def test_body_refusals_name_the_field_as_sent(
    tmp_path: Path, path: str, body: dict[str, Any], expected: tuple[int, str, list[Any]]
) -> None:
    async def scenario(gateway: InProcessApp) -> httpx.Response:
        return await gateway.client.post(path, json=body, headers=gateway.auth())

    status, code, details, message = _refusal(_run(tmp_path, scenario))
    assert (status, code, details) == expected
    assert message == "; ".join(f"{d['field']}: {d['message']}" for d in details)


def test_a_planned_endpoint_says_not_to_retry(tmp_path: Path) -> None:
    async def scenario(gateway: InProcessApp) -> httpx.Response:
        return await gateway.client.post(
            "/v1/audio/speech", json={"model": "m", "input": "x"}, headers=gateway.auth()
        )

    response = _run(tmp_path, scenario)
    assert response.status_code == 501
    assert response.headers["x-should-retry"] == "false"
    assert response.json()["error"]["code"] == "not_implemented"
