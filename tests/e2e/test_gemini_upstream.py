"""The gateway in front of a Gemini API upstream (a fake one, over real HTTP), driven by the
official `openai` SDK: the OpenAI shapes a client sees are translated from Gemini's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import httpx
import openai
import pytest
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)

from tests.fakes.gemini_upstream import (
    FakeGemini,
    Reply,
    StreamReply,
    candidate,
    function_call,
    response,
    text,
    usage,
)
from tests.support.gateway_process import GatewayProcess, start_gateway

CONFIG = """
[gateway]
starting_grant_credits = 1000

[providers.gem]
kind = "gemini"
base_url = "{base_url}"
api_key = "g-upstream-secret"
timeout_seconds = 2
stream_read_timeout_seconds = 2

[[models]]
id = "gem-chat"
provider = "gem"
upstream_model = "gemini-2.5-flash"
capability = "chat"
owned_by = "google"
markup = 1000
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15, cached_input_usd_per_mtok = 1 }}

[routing.auto]
chat = ["gem-chat"]

[tenants.default]
"""
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hello"}]
PATH = "/v1beta/models/gemini-2.5-flash:"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeGemini]:
    fake = FakeGemini()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    upstream: FakeGemini, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-gemini")
    process = start_gateway(workdir, CONFIG.format(base_url=upstream.base_url))
    yield process
    process.stop()


@pytest.fixture
def client(gateway: GatewayProcess, upstream: FakeGemini) -> Iterator[openai.OpenAI]:
    upstream.requests.clear()
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


def test_a_whole_completion(client: openai.OpenAI, upstream: FakeGemini) -> None:
    completion = client.chat.completions.create(
        model="auto",
        messages=[{"role": "system", "content": "Be brief."}, *MESSAGES],
        max_tokens=20,
        temperature=0.2,
    )
    assert completion.choices[0].message.content == upstream.text
    assert completion.choices[0].finish_reason == "stop"
    assert completion.id.startswith("chatcmpl_") and completion.model == "gem-chat"
    sent = upstream.requests[-1]
    assert sent.path == PATH + "generateContent"
    assert sent.headers["x-goog-api-key"] == "g-upstream-secret"
    assert sent.json == {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "Hello"}]}],
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 20},
    }


def test_a_stream_reassembled(client: openai.OpenAI, upstream: FakeGemini) -> None:
    stream = client.chat.completions.create(
        model="gem-chat",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert upstream.requests[-1].path == PATH + "streamGenerateContent?alt=sse"
    assert upstream.requests[-1].json["generationConfig"] == {"maxOutputTokens": 100}
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == upstream.text
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert {c.id for c in chunks} == {chunks[0].id} and chunks[0].model == "gem-chat"
    final = chunks[-1]
    assert final.choices == [] and final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (12, 6)
    # (12 x 5 + 6 x 15) / 1e6 USD x 1000 credits per USD
    assert (final.usage.model_extra or {})["credits"] == "0.1500"


def test_tool_calls_round_trip(client: openai.OpenAI, upstream: FakeGemini) -> None:
    tools: list[ChatCompletionToolParam] = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    call = function_call("get_weather", {"city": "Paris"}, signature="c2lnLTE=")
    upstream.enqueue(Reply(body=response(candidate(call))))
    first = client.chat.completions.create(
        model="gem-chat",
        messages=MESSAGES,
        tools=tools,
        tool_choice="required",
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls is not None
    (tool_call,) = choice.message.tool_calls
    assert tool_call.type == "function" and tool_call.id.startswith("call_")
    assert isinstance(tool_call, ChatCompletionMessageFunctionToolCall)
    assert tool_call.function.name == "get_weather"
    assert json.loads(tool_call.function.arguments) == {"city": "Paris"}
    sent = upstream.requests[-1].json
    assert sent["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                }
            ]
        }
    ]
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    # The SDK keeps `extra_content`, so the thought signature goes back to Gemini.
    assistant = choice.message.model_dump(exclude_none=True)
    second = client.chat.completions.create(
        model="gem-chat",
        messages=[
            *MESSAGES,
            cast(ChatCompletionMessageParam, assistant),
            {"role": "tool", "tool_call_id": tool_call.id, "content": "18C"},
        ],
        tools=tools,
    )
    assert second.choices[0].message.content == upstream.text
    contents = upstream.requests[-1].json["contents"]
    assert contents[1:] == [
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                    "thoughtSignature": "c2lnLTE=",
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"content": "18C"}}}
            ],
        },
    ]


def test_usage_details_and_credits(client: openai.OpenAI, upstream: FakeGemini) -> None:
    answer = response(
        candidate(text("Let me see.", thought=True), text("Done.")),
        usage_metadata=usage(1000, 200, thoughts=100, cached=400),
    )
    upstream.enqueue(Reply(body=answer))
    completion = client.chat.completions.create(model="gem-chat", messages=MESSAGES)
    message = completion.choices[0].message
    assert message.content == "Done."
    assert (message.model_extra or {})["reasoning_content"] == "Let me see."
    used = completion.usage
    assert used is not None
    assert (used.prompt_tokens, used.completion_tokens, used.total_tokens) == (1000, 300, 1300)
    assert used.prompt_tokens_details is not None and used.completion_tokens_details is not None
    assert used.prompt_tokens_details.cached_tokens == 400
    assert used.completion_tokens_details.reasoning_tokens == 100
    # (600 x 5 + 400 x 1 + 300 x 15) / 1e6 USD x 1000 credits per USD
    assert (used.model_extra or {})["credits"] == "7.9000"


@pytest.mark.parametrize(
    ("reply", "error", "status", "code"),
    [
        (
            Reply.error(400, "INVALID_ARGUMENT", "Unknown name 'foo'"),
            openai.BadRequestError,
            400,
            "invalid_request",
        ),
        (
            Reply(body=response(prompt_feedback={"blockReason": "PROHIBITED_CONTENT"})),
            openai.BadRequestError,
            400,
            "invalid_request",
        ),
        (
            Reply.error(429, "RESOURCE_EXHAUSTED", "quota", retry_delay="20s"),
            openai.InternalServerError,
            503,
            "model_unavailable",
        ),
        (
            Reply.error(503, "UNAVAILABLE", "overloaded"),
            openai.InternalServerError,
            503,
            "model_unavailable",
        ),
        (
            Reply.error(504, "DEADLINE_EXCEEDED", "Deadline expired"),
            openai.InternalServerError,
            504,
            "upstream_timeout",
        ),
        (Reply(delay=3.0), openai.InternalServerError, 504, "upstream_timeout"),
        (
            Reply.error(500, "INTERNAL", "An internal error has occurred"),
            openai.InternalServerError,
            502,
            "upstream_error",
        ),
        (
            Reply.error(400, "INVALID_ARGUMENT", "API key not valid", reason="API_KEY_INVALID"),
            openai.InternalServerError,
            502,
            "upstream_error",
        ),
    ],
)
def test_typed_errors(
    client: openai.OpenAI,
    upstream: FakeGemini,
    reply: Reply,
    error: type[openai.APIStatusError],
    status: int,
    code: str,
) -> None:
    upstream.enqueue(reply)
    with pytest.raises(error) as caught:
        client.chat.completions.create(model="gem-chat", messages=MESSAGES)
    assert caught.value.status_code == status
    assert caught.value.code == code
    assert "g-upstream-secret" not in caught.value.response.text
    assert "API key not valid" not in caught.value.response.text
    if status == 400:
        assert "Unknown name 'foo'" in caught.value.message or "PROHIBITED" in caught.value.message


def test_a_stream_broken_off_mid_way(
    client: openai.OpenAI, upstream: FakeGemini, gateway: GatewayProcess
) -> None:
    before = _ledger_size(gateway)
    upstream.enqueue(StreamReply(break_after=3))
    stream = client.chat.completions.create(model="gem-chat", messages=MESSAGES, stream=True)
    contents: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in stream:
            contents += [c.delta.content or "" for c in chunk.choices]
    assert "".join(contents) == "Hello from the"
    assert _ledger_size(gateway) == before + 1  # what was produced is charged, once


def _ledger_size(gateway: GatewayProcess) -> int:
    page = httpx.get(
        f"{gateway.base_url}/wallet/ledger",
        params={"limit": "100"},
        headers={"Authorization": f"Bearer {gateway.api_key}"},
    ).json()
    return len(page["data"])
