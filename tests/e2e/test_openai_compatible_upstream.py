"""The gateway in front of OpenAI-compatible servers (fakes over real HTTP standing for a
vLLM that takes OpenAI's body and an Ollama that wants `max_tokens` and reports no usage in
streams), driven by the official `openai` SDK, and once by the `anthropic` SDK through
`/v1/messages`: the usage the gateway counted itself (docs/api.md, "Money") is marked
`estimated` and charged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from tests.fakes.openai_upstream import FakeOpenAI, Reply, StreamReply
from tests.fakes.recorded import load
from tests.support.gateway_process import GatewayProcess, start_gateway

CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.vllm]
kind = "openai_compatible"
base_url = "{vllm}"
api_key_env = "VLLM_TEST_KEY"
timeout_seconds = 2

[providers.ollama]
kind = "openai_compatible"
base_url = "{ollama}"
stream_options = false
max_tokens_field = "max_tokens"
drop_fields = ["parallel_tool_calls"]
extra_headers = {{ "X-Team" = "search" }}
timeout_seconds = 2

[[models]]
id = "vllm-chat"
provider = "vllm"
upstream_model = "meta-llama/Llama-3.1-8B-Instruct"
capability = "chat"
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 0.2, output_usd_per_mtok = 0.6 }}

[[models]]
id = "ollama-chat"
provider = "ollama"
upstream_model = "qwen2.5-coder:7b"
capability = "chat"
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 1000, output_usd_per_mtok = 2000 }}

[routing.policies.chat]
candidates = [{{ model = "vllm-chat" }}, {{ model = "ollama-chat" }}]
backoff_ms = 0

[tenants.default]
"""
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def vllm() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(text="Hello from vLLM.")
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def ollama() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(text="Hello from Ollama.")
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    vllm: FakeOpenAI, ollama: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-compatible")
    config = CONFIG.format(vllm=vllm.base_url, ollama=ollama.base_url)
    process = start_gateway(workdir, config, extra_env={"VLLM_TEST_KEY": "vllm-token-123456"})
    yield process
    process.stop()


@pytest.fixture
def client(
    gateway: GatewayProcess, vllm: FakeOpenAI, ollama: FakeOpenAI
) -> Iterator[openai.OpenAI]:
    vllm.requests.clear()
    ollama.requests.clear()
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


def test_a_server_that_takes_openais_body(client: openai.OpenAI, vllm: FakeOpenAI) -> None:
    stream = client.chat.completions.create(
        model="vllm-chat", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    sent = vllm.requests[-1]
    assert sent.headers["authorization"] == "Bearer vllm-token-123456"
    assert sent.json["stream_options"] == {"include_usage": True}
    assert sent.json["max_completion_tokens"] == 100
    final = chunks[-1].usage
    assert final is not None and (final.prompt_tokens, final.completion_tokens) == (12, 6)
    assert "estimated" not in (final.model_extra or {})


def test_a_server_without_stream_usage_is_counted_and_says_so(
    client: openai.OpenAI, ollama: FakeOpenAI
) -> None:
    stream = client.chat.completions.create(
        model="ollama-chat",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=50,
    )
    chunks = list(stream)
    sent = ollama.requests[-1]
    assert "stream_options" not in sent.json and "authorization" not in sent.headers
    assert sent.json["max_tokens"] == 50 and "max_completion_tokens" not in sent.json
    assert sent.headers["x-team"] == "search"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ollama.text
    final = chunks[-1].usage
    assert final is not None
    extra = final.model_extra or {}
    assert extra["estimated"] is True
    # prompt: the request body's bytes / 4 + 1 = 36; output: ceil(18 / 4) = 5 ("Hello from
    # Ollama.")
    assert (final.prompt_tokens, final.completion_tokens) == (36, 5)
    # (36 x 1000 + 5 x 2000) / 1e6 USD x 1000 credits per USD
    assert extra["credits"] == "46.0000"


def test_the_recorded_ollama_tool_stream(client: openai.OpenAI, ollama: FakeOpenAI) -> None:
    events = [b"data: " + e.encode() + b"\n\n" for e in load("ollama_tool_stream")["events"]]
    ollama.enqueue(StreamReply(chunks=events))
    tools: list[ChatCompletionToolParam] = [
        {"type": "function", "function": {"name": "run_command", "parameters": {"type": "object"}}}
    ]
    stream = client.chat.completions.create(
        model="ollama-chat",
        messages=MESSAGES,
        tools=tools,
        parallel_tool_calls=True,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "parallel_tool_calls" not in ollama.requests[-1].json
    calls = [
        c.choices[0].delta.tool_calls[0]
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
    ]
    assert [json.loads(call.function.arguments or "") for call in calls if call.function] == [
        {"command": "ls"},
        {"command": "ls -l"},
    ]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    final = chunks[-1].usage
    assert final is not None and (final.model_extra or {})["estimated"] is True


def test_a_whole_answer_without_usage(client: openai.OpenAI, ollama: FakeOpenAI) -> None:
    body = {
        "id": "chatcmpl-200",
        "object": "chat.completion",
        "created": 1789345911,
        "model": "qwen2.5-coder:7b",
        "system_fingerprint": "fp_ollama",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Paris."},
                "finish_reason": "stop",
            }
        ],
    }
    ollama.enqueue(Reply(body=body))
    completion = client.chat.completions.create(model="ollama-chat", messages=MESSAGES)
    used = completion.usage
    assert used is not None and (used.prompt_tokens, used.completion_tokens) == (18, 2)
    assert (used.model_extra or {})["estimated"] is True


def test_a_loading_server_falls_back_to_the_other(
    client: openai.OpenAI, vllm: FakeOpenAI, ollama: FakeOpenAI
) -> None:
    vllm.enqueue(Reply.error(503, "The model is loading"))
    raw = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    assert raw.parse().choices[0].message.content == ollama.text
    assert raw.headers["x-gateway-model"] == "ollama-chat"
    assert len(vllm.requests) == 1 and len(ollama.requests) == 1


@pytest.mark.parametrize(
    ("reply", "sdk_error", "status", "code"),
    [
        (
            Reply.error(400, "max_tokens is too large"),
            openai.BadRequestError,
            400,
            "invalid_request",
        ),
        (Reply.error(503, "busy"), openai.InternalServerError, 503, "model_unavailable"),
        (Reply(delay=3.0), openai.InternalServerError, 504, "upstream_timeout"),
        (Reply.error(500, "CUDA error"), openai.InternalServerError, 502, "upstream_error"),
    ],
)
def test_errors_by_kind(
    client: openai.OpenAI,
    vllm: FakeOpenAI,
    reply: Reply,
    sdk_error: type[openai.APIStatusError],
    status: int,
    code: str,
) -> None:
    vllm.enqueue(reply)
    with pytest.raises(sdk_error) as caught:
        client.chat.completions.create(model="vllm-chat", messages=MESSAGES)
    assert caught.value.status_code == status and caught.value.code == code


def test_the_messages_api_through_the_translation(
    gateway: GatewayProcess, ollama: FakeOpenAI
) -> None:
    root = gateway.base_url.removesuffix("/v1")
    with (
        anthropic.Anthropic(base_url=root, api_key=gateway.api_key, max_retries=0) as claude,
        claude.messages.stream(
            model="ollama-chat", max_tokens=64, messages=[{"role": "user", "content": "hello"}]
        ) as stream,
    ):
        message = stream.get_final_message()
    assert message.content[0].type == "text" and message.content[0].text == ollama.text
    assert (message.usage.input_tokens, message.usage.output_tokens) == (26, 5)
    assert ollama.requests[-1].json["max_tokens"] == 64
