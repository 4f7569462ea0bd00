"""The Responses API as the chat service takes it (`gateway.chat.dialect`): the dialect names
its output limit, and a passthrough body's limit is lowered to what a wallet-bounded hold pays
for (the integration head lacked both, and every `POST /v1/responses` answered 500)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.chat.dialect import ChatDialect, NativeRequest
from gateway.http.openai_responses.dialect import OpenAIResponses
from gateway.http.openai_responses.native import ResponsesCall
from gateway.http.openai_responses.request import decode_responses, to_chat_request


def test_the_dialect_names_max_output_tokens() -> None:
    request, _ = decode_responses(b'{"model": "auto", "input": "Hi"}')
    dialect: ChatDialect = OpenAIResponses(to_chat_request(request))
    assert dialect.limit_field == "max_output_tokens"
    assert dialect.lowers_max_tokens is False


@pytest.mark.parametrize(
    ("asked", "lowered", "sent"),
    [(None, None, None), (500, None, 500), (500, 200, 200), (100, 200, 100), (None, 200, 200)],
)
def test_a_passthrough_body_is_lowered_to_what_the_hold_pays_for(
    asked: int | None, lowered: int | None, sent: int | None
) -> None:
    raw: dict[str, Any] = {"model": "gpt-pass", "input": "Hi"}
    if asked is not None:
        raw["max_output_tokens"] = asked
    call: NativeRequest = ResponsesCall(raw)
    body = call.body_for("gpt-5-upstream", lowered)
    assert body["model"] == "gpt-5-upstream"
    assert body.get("max_output_tokens") == sent
    assert raw["model"] == "gpt-pass"  # the client's body is left as it came
