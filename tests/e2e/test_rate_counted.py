"""Every authenticated request counts against its key's requests per minute, whatever its
answer: a call refused before its admission (an unknown model, an invalid body) takes its
slot too, so a key cannot probe or hammer without limit (`limited`: 3 requests a minute)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.gateway_process import GatewayProcess, client_for

HELLO = [{"role": "user", "content": "hi"}]
ADMITTED_REFUSALS: dict[str, tuple[str, dict[str, Any], int]] = {
    "chat, unknown model": ("/v1/chat/completions", {"model": "nope", "messages": HELLO}, 404),
    "chat, invalid body": ("/v1/chat/completions", {"model": "auto", "messages": []}, 400),
    "messages, unknown model": (
        "/v1/messages",
        {"model": "nope", "max_tokens": 5, "messages": HELLO},
        404,
    ),
    "image, unknown model": ("/v1/images/generations", {"model": "nope", "prompt": "x"}, 422),
}


@pytest.mark.parametrize("case", list(ADMITTED_REFUSALS))
def test_refused_calls_take_their_slot_three_refusals_then_429(
    gateway: GatewayProcess, case: str
) -> None:
    path, body, status = ADMITTED_REFUSALS[case]
    with client_for(gateway, gateway.new_key("limited")) as client:
        answers = [client.post(path, json=body) for _ in range(6)]
    assert [a.status_code for a in answers] == [status] * 3 + [429] * 3, [a.text for a in answers]
    remaining = [a.headers["x-ratelimit-remaining-requests"] for a in answers]
    assert remaining == ["2", "1", "0", "0", "0", "0"]
    assert all(a.headers["x-ratelimit-limit-requests"] == "3" for a in answers)
    assert all(int(a.headers["retry-after"]) >= 1 for a in answers[3:])
    codes = {a.json()["error"].get("code") or a.json()["error"]["type"] for a in answers[3:]}
    assert codes <= {"rate_limited", "rate_limit_error"}


def test_a_wrong_content_type_takes_its_slot(gateway: GatewayProcess) -> None:
    with client_for(gateway, gateway.new_key("limited")) as client:
        answers = [
            client.post(
                "/v1/chat/completions", content=b"{}", headers={"content-type": "text/plain"}
            )
            for _ in range(4)
        ]
    assert [a.status_code for a in answers] == [415, 415, 415, 429]
