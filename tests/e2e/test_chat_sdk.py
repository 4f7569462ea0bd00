"""The official openai SDK against a running gateway: chat, streams, models, errors."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.support.gateway_process import GatewayProcess

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three colours."},
]


def test_chat_sync_returns_completion_with_credits(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="sim-chat-1", messages=MESSAGES)
    assert completion.id.startswith("chatcmpl_")
    assert len(completion.id) >= len("chatcmpl_") + 32
    assert completion.object == "chat.completion"
    assert completion.model == "sim-chat-1"
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason in ("stop", "length")
    usage = completion.usage
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    extra = usage.model_extra or {}
    assert float(extra["credits"]) > 0
    assert len(extra["credits"].split(".")[1]) == 4
    assert "credits_usd_reference" in extra


def test_same_prompt_gives_same_text(client: openai.OpenAI) -> None:
    first = client.chat.completions.create(model="sim-chat-1", messages=MESSAGES)
    second = client.chat.completions.create(model="sim-chat-1", messages=MESSAGES)
    assert first.choices[0].message.content == second.choices[0].message.content
    assert first.id != second.id


def test_auto_reports_the_model_that_handled_it(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="auto", messages=MESSAGES)
    assert completion.model == "sim-chat-1"


def test_max_tokens_is_honoured_as_max_completion_tokens(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="sim-chat-1", messages=MESSAGES, max_tokens=2)
    assert completion.usage is not None and completion.usage.completion_tokens <= 2
    assert completion.choices[0].finish_reason == "length"


def test_stream_is_reassembled_by_the_sdk(client: openai.OpenAI) -> None:
    sync = client.chat.completions.create(model="sim-chat-1", messages=MESSAGES)
    stream = client.chat.completions.create(
        model="sim-chat-1",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == sync.choices[0].message.content
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1
    assert finals[0].choices[0].delta.content in (None, "")
    assert {c.id for c in chunks} == {chunks[0].id}
    assert chunks[0].id.startswith("chatcmpl_")
    assert all(c.model == "sim-chat-1" for c in chunks)
    usage = chunks[-1].usage
    assert usage is not None and chunks[-1].choices == []
    assert float((usage.model_extra or {})["credits"]) > 0


def test_stream_without_include_usage_has_no_usage_chunk(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(model="sim-chat-1", messages=MESSAGES, stream=True)
    )
    assert all(c.usage is None for c in chunks)
    assert all(c.choices for c in chunks)


def test_raw_stream_wire_format(gateway: GatewayProcess) -> None:
    body = {"model": "sim-chat-1", "messages": MESSAGES, "stream": True}
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    with httpx.stream(
        "POST", f"{gateway.base_url}/chat/completions", json=body, headers=headers, timeout=10
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = response.read().decode()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"


def test_models_list_is_the_tenants_view(client: openai.OpenAI, gateway: GatewayProcess) -> None:
    ids = {m.id for m in client.models.list()}
    assert {"sim-chat-1", "sim-chat-pro", "sim-slow"} <= ids
    gateway.grant("narrow", "100")
    narrow = openai.OpenAI(
        base_url=gateway.base_url, api_key=gateway.new_key("narrow"), max_retries=0
    )
    assert [m.id for m in narrow.models.list()] == ["sim-chat-pro"]
    with pytest.raises(openai.NotFoundError):
        narrow.chat.completions.create(model="sim-chat-1", messages=MESSAGES)
    assert narrow.chat.completions.create(model="auto", messages=MESSAGES).model == "sim-chat-pro"
    assert client.models.retrieve("sim-chat-1").owned_by == "simulator"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"temperature": 2.5}, "temperature"),
        ({"extra_body": {"not_a_field": 1}}, "not_a_field"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
        ({"messages": []}, "messages"),
        (
            {"tools": [{"type": "function", "function": {"name": "bad name!"}}]},
            "tools[0].function.name",
        ),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_completion_tokens": 100000}, "max_completion_tokens"),
        ({"max_tokens": 10**7}, "max_tokens"),
    ],
)
def test_invalid_bodies_are_400_invalid_request(
    client: openai.OpenAI, kwargs: dict[str, object], field: str
) -> None:
    call = {"model": "sim-chat-1", "messages": MESSAGES, **kwargs}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**call)  # type: ignore[call-overload]
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "invalid_request"
    assert error["retryable"] is False
    assert error["request_id"] == caught.value.response.headers["x-request-id"]
    if field != "body":
        assert field in [d["field"] for d in error["details"]]


def test_bad_key_is_401(gateway: GatewayProcess) -> None:
    bad = openai.OpenAI(base_url=gateway.base_url, api_key="gw-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        bad.chat.completions.create(model="sim-chat-1", messages=MESSAGES)
    assert caught.value.code == "invalid_api_key"
    assert caught.value.response.headers["www-authenticate"] == "Bearer"


def test_unknown_model_is_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="no-such-model", messages=MESSAGES)
    assert caught.value.code == "model_not_found"


@pytest.mark.parametrize(
    ("directive", "error_type", "code"),
    [
        ("[[sim:fail=502]]", openai.InternalServerError, "upstream_error"),
        ("[[sim:fail=503]]", openai.InternalServerError, "model_unavailable"),
        ("[[sim:fail=504]]", openai.InternalServerError, "upstream_timeout"),
    ],
)
def test_upstream_failures_map_to_envelopes(
    client: openai.OpenAI, directive: str, error_type: type[Exception], code: str
) -> None:
    messages = [{"role": "user", "content": f"hello {directive}"}]
    with pytest.raises(error_type) as caught:
        client.chat.completions.create(model="sim-chat-pro", messages=messages)
    assert caught.value.code == code  # type: ignore[attr-defined]
    assert caught.value.body["retryable"] is True  # type: ignore[attr-defined]


def test_failure_before_first_byte_of_a_stream_is_a_json_error(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "hello [[sim:fail=502]]"}]
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="sim-chat-pro", messages=messages, stream=True)
    assert caught.value.response.headers["content-type"].startswith("application/json")


def test_stream_broken_midway_raises_in_the_sdk(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "tell a story [[sim:fail_after=3]]"}]
    stream = client.chat.completions.create(model="sim-chat-1", messages=messages, stream=True)
    received: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in stream:
            if chunk.choices:
                received.append(chunk.choices[0].delta.content or "")
    assert len([r for r in received if r]) == 3
