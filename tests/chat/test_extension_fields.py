"""Chat completions' extension fields (top-level fields beyond OpenAI's, as vLLM users send them
in the openai SDK's `extra_body`): passed as sent to OpenAI-format upstreams, translated where a
translated upstream has them (`top_k`), a 400 naming each other one; `auto` keeps to the routes
that take them; the body is decoded twice only when it has some."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gateway.chat.outcomes import ChatCompleted
from gateway.errors import IdempotencyKeyReused, InvalidRequest
from gateway.http.chat_body import decode_chat_request
from gateway.http.openai_sse import OPENAI_CHAT
from tests.chat.upstream_fakes import Upstreams, fake_upstreams

VLLM = {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "guided_json": {"type": "object"}}


def _body(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "Hi"}], **extra}


async def _call(up: Upstreams, body: dict[str, Any], key: str | None = None) -> ChatCompleted:
    raw = msgspec.json.encode(body)
    request, extensions = decode_chat_request(raw)
    outcome = await up.parts.service.handle(
        up.parts.caller(),
        request,
        body_size=len(raw),
        dialect=OPENAI_CHAT,
        request_id="req_test",
        idempotency_key=key,
        extensions=extensions,
    )
    assert isinstance(outcome, ChatCompleted)
    return outcome


def _run(tmp_path: Path, test: Any, auto: tuple[str, ...] = ("sim",)) -> None:
    async def main() -> None:
        async with fake_upstreams(tmp_path, auto) as upstreams:
            await test(upstreams)

    asyncio.run(main())


def test_the_decoder_keeps_extension_fields_beside_the_request() -> None:
    request, extensions = decode_chat_request(msgspec.json.encode(_body("m", **VLLM)))
    assert request.model == "m" and extensions == VLLM
    request, extensions = decode_chat_request(msgspec.json.encode(_body("m", top_p=0.5)))
    assert request.top_p == 0.5 and extensions == {}
    with pytest.raises(InvalidRequest) as bad:  # the request's own types, checked as before
        decode_chat_request(msgspec.json.encode(_body("m", top_p="high", top_k=2)))
    assert [d.field for d in bad.value.details] == ["top_p"]


def test_openai_upstreams_get_them_as_sent(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        await _call(up, _body("openai", **VLLM))
        sent = up.sent("openai")
        assert {name: sent[name] for name in VLLM} == VLLM

    _run(tmp_path, test)


def test_top_k_is_translated_where_the_upstream_has_it(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        await _call(up, _body("anthropic", top_k=7))
        assert up.anthropic.requests[-1].json["top_k"] == 7
        await _call(up, _body("gemini", top_k=7))
        assert up.sent("gemini")["generationConfig"]["topK"] == 7
        await _call(up, _body("bedrock", top_k=7))
        assert up.sent("bedrock")["additionalModelRequestFields"] == {"top_k": 7}
        answer = await _call(up, _body("sim", top_k=7))
        assert msgspec.json.decode(answer.body)["choices"][0]["message"]["content"]

    _run(tmp_path, test)


@pytest.mark.parametrize("model", ["anthropic", "gemini", "bedrock", "sim"])
def test_another_is_refused_naming_it_on_a_translated_upstream(tmp_path: Path, model: str) -> None:
    async def test(up: Upstreams) -> None:
        with pytest.raises(InvalidRequest) as refused:
            await _call(up, _body(model, top_k=3, colour="blue", min_p=0.1))
        assert [(d.field, d.message) for d in refused.value.details] == [
            ("colour", "not supported by this model's upstream"),
            ("min_p", "not supported by this model's upstream"),
        ]
        assert not any(fake.requests for fake in (up.anthropic, up.gemini, up.bedrock))

    _run(tmp_path, test)


def test_auto_keeps_to_the_routes_that_take_them(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        outcome = await _call(up, _body("auto", min_p=0.1))
        assert outcome.model == "openai" and up.sent("openai")["min_p"] == 0.1
        outcome = await _call(up, _body("auto", top_k=5))
        assert outcome.model == "gemini" and up.sent("gemini")["generationConfig"]["topK"] == 5

    _run(tmp_path, test, auto=("gemini", "openai"))


def test_an_idempotency_key_covers_them(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        await _call(up, _body("openai", min_p=0.1), key="k1")
        with pytest.raises(IdempotencyKeyReused):
            await _call(up, _body("openai", min_p=0.2), key="k1")

    _run(tmp_path, test)
