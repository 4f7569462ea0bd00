"""The gateway in front of Amazon Bedrock (a fake one over real HTTP, which checks every SigV4
signature), driven by the official `openai` SDK, and once by the `anthropic` SDK through
`/v1/messages`: answers, the binary event stream, tools, each error by its cause, cache
billing, a fallback to an OpenAI-compatible server when Bedrock throttles, and s3:// images
refused unless under the provider's `allowed_storage_prefixes`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import anthropic
import httpx
import openai
import pytest
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)

from tests.fakes.bedrock_upstream import (
    EventException,
    FakeBedrock,
    Reply,
    StreamReply,
    answer,
    text,
    tool_use,
    usage,
)
from tests.fakes.openai_upstream import FakeOpenAI
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import backup_chat

KEY, SECRET = "AKIDE2EGATEWAY01", "e2e-throwaway-secret-for-the-fake"
UPSTREAM_MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.bedrock]
kind = "bedrock"
region = "us-east-1"
base_url = "{bedrock}"
timeout_seconds = 2
stream_read_timeout_seconds = 2
allowed_storage_prefixes = ["s3://team-bucket/shared/"]

[[models]]
id = "claude-bedrock"
provider = "bedrock"
upstream_model = "{model}"
capability = "chat"
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 3, output_usd_per_mtok = 15, cached_input_usd_per_mtok = 0.3, \
cache_write_usd_per_mtok = 3.75 }}

{backup_chat}
[tenants.default]
"""
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hello"}]
PATH = "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeBedrock]:
    fake = FakeBedrock(credentials=(KEY, SECRET))
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    upstream: FakeBedrock, backup: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-bedrock")
    config = CONFIG.format(
        bedrock=upstream.base_url,
        model=UPSTREAM_MODEL,
        backup_chat=backup_chat("claude-bedrock", backup.base_url),
    )
    aws = {
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_SHARED_CREDENTIALS_FILE": str(workdir / "no-aws-credentials"),
        "AWS_CONFIG_FILE": str(workdir / "no-aws-config"),
    }
    process = start_gateway(workdir, config, extra_env=aws)
    yield process
    process.stop()


@pytest.fixture
def client(
    gateway: GatewayProcess, upstream: FakeBedrock, backup: FakeOpenAI
) -> Iterator[openai.OpenAI]:
    upstream.requests.clear()
    backup.requests.clear()
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


def test_a_whole_completion_signed_for_bedrock(
    client: openai.OpenAI, upstream: FakeBedrock
) -> None:
    completion = client.chat.completions.create(
        model="claude-bedrock",
        messages=[{"role": "system", "content": "Be brief."}, *MESSAGES],
        max_tokens=20,
        temperature=0.2,
    )
    assert completion.choices[0].message.content == upstream.text
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "claude-bedrock"
    sent = upstream.requests[-1]
    assert sent.path == PATH + "converse"
    assert upstream.signed_by[-1] == KEY
    assert sent.json == {
        "system": [{"text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"text": "Hello"}]}],
        "inferenceConfig": {"maxTokens": 20, "temperature": 0.2},
    }


def test_the_event_stream_reassembled(client: openai.OpenAI, upstream: FakeBedrock) -> None:
    upstream.enqueue(StreamReply(piece=3))  # messages split across reads
    stream = client.chat.completions.create(
        model="claude-bedrock",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert upstream.requests[-1].path == PATH + "converse-stream"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == upstream.text
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    final = chunks[-1]
    assert final.choices == [] and final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (12, 6)
    # (12 x 3 + 6 x 15) / 1e6 USD x 1000 credits per USD
    assert (final.usage.model_extra or {})["credits"] == "0.1260"


def test_tool_calls_round_trip(client: openai.OpenAI, upstream: FakeBedrock) -> None:
    tools: list[ChatCompletionToolParam] = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    upstream.enqueue(
        Reply(
            body=answer(
                tool_use("tooluse_abc123", "get_weather", {"city": "Paris"}), stop="tool_use"
            )
        )
    )
    first = client.chat.completions.create(
        model="claude-bedrock", messages=MESSAGES, tools=tools, tool_choice="required"
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    (call,) = choice.message.tool_calls
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.id == "tooluse_abc123" and json.loads(call.function.arguments) == {"city": "Paris"}
    assert upstream.requests[-1].json["toolConfig"]["toolChoice"] == {"any": {}}
    assistant = choice.message.model_dump(exclude_none=True)
    second = client.chat.completions.create(
        model="claude-bedrock",
        messages=[
            *MESSAGES,
            cast(ChatCompletionMessageParam, assistant),
            {"role": "tool", "tool_call_id": call.id, "content": "18C"},
        ],
        tools=tools,
    )
    assert second.choices[0].message.content == upstream.text
    assert upstream.requests[-1].json["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": "tooluse_abc123",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "tooluse_abc123", "content": [{"text": "18C"}]}}
            ],
        },
    ]


def test_cache_reads_and_writes_are_billed_at_their_prices(
    client: openai.OpenAI, upstream: FakeBedrock
) -> None:
    counts = usage(100, 20, cache_read=1000, cache_write=300)
    upstream.enqueue(Reply(body=answer(text("Done."), usage_counts=counts)))
    completion = client.chat.completions.create(model="claude-bedrock", messages=MESSAGES)
    used = completion.usage
    assert used is not None and used.prompt_tokens == 1400 and used.completion_tokens == 20
    assert (
        used.prompt_tokens_details is not None and used.prompt_tokens_details.cached_tokens == 1000
    )
    # (100 x 3 + 1000 x 0.3 + 300 x 3.75 + 20 x 15) / 1e6 USD x 1000 credits per USD
    assert (used.model_extra or {})["credits"] == "2.0250"


@pytest.mark.parametrize(
    ("status", "name", "sdk_error", "gateway_status", "code"),
    [
        (429, "ThrottlingException", openai.InternalServerError, 503, "model_unavailable"),
        (429, "ModelNotReadyException", openai.InternalServerError, 503, "model_unavailable"),
        (400, "ValidationException", openai.BadRequestError, 400, "invalid_request"),
        (408, "ModelTimeoutException", openai.InternalServerError, 504, "upstream_timeout"),
        (424, "ModelErrorException", openai.InternalServerError, 502, "upstream_error"),
        (403, "AccessDeniedException", openai.InternalServerError, 502, "upstream_error"),
    ],
)
def test_each_cause_is_its_own_error(
    client: openai.OpenAI,
    upstream: FakeBedrock,
    status: int,
    name: str,
    sdk_error: type[openai.APIStatusError],
    gateway_status: int,
    code: str,
) -> None:
    upstream.enqueue(Reply.error(status, name, f"{name} said no"))
    with pytest.raises(sdk_error) as caught:
        client.chat.completions.create(model="claude-bedrock", messages=MESSAGES)
    assert caught.value.status_code == gateway_status and caught.value.code == code
    assert SECRET not in caught.value.response.text


def test_an_exception_event_before_the_first_chunk_is_a_json_error(
    client: openai.OpenAI, upstream: FakeBedrock
) -> None:
    events: list[Any] = [
        ("messageStart", {"role": "assistant"}),
        EventException("throttlingException", "Too many tokens"),
    ]
    upstream.enqueue(StreamReply(events=events))
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="claude-bedrock", messages=MESSAGES, stream=True)
    assert caught.value.status_code == 503 and caught.value.code == "model_unavailable"


def test_a_throttled_bedrock_falls_back_to_the_other_server(
    client: openai.OpenAI, upstream: FakeBedrock, backup: FakeOpenAI
) -> None:
    upstream.enqueue(Reply.error(429, "ThrottlingException", "Too many requests"))
    raw = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    completion = raw.parse()
    assert completion.choices[0].message.content == backup.text
    assert raw.headers["x-gateway-model"] == "backup-chat"
    assert "claude-bedrock" in raw.headers["x-gateway-route"]
    assert len(upstream.requests) == 1 and len(backup.requests) == 1


def test_the_messages_api_through_the_translation(
    gateway: GatewayProcess, upstream: FakeBedrock
) -> None:
    root = gateway.base_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key=gateway.api_key, max_retries=0) as claude:
        message = claude.messages.create(
            model="claude-bedrock",
            max_tokens=64,
            system="Be brief.",
            messages=[{"role": "user", "content": "Hello"}],
        )
        with claude.messages.stream(
            model="claude-bedrock", max_tokens=64, messages=[{"role": "user", "content": "Again"}]
        ) as stream:
            streamed = stream.get_final_message()
    (block,) = message.content
    assert block.type == "text" and block.text == upstream.text
    assert message.stop_reason == "end_turn" and message.model == "claude-bedrock"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (12, 6)
    assert streamed.content[0].type == "text" and streamed.content[0].text == upstream.text
    first, second = upstream.requests[-2:]
    assert first.path == PATH + "converse" and second.path == PATH + "converse-stream"
    assert first.json["system"] == [{"text": "Be brief."}]
    assert upstream.signed_by[-2:] == [KEY, KEY]


def _image_message(url: str) -> list[ChatCompletionMessageParam]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe this."},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
    ]


def _balance(gateway: GatewayProcess) -> str:
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    response = httpx.get(gateway.base_url + "/wallet", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    return str(response.json()["balance_credits"])


@pytest.mark.parametrize(
    "url",
    [
        "s3://gateway-artifacts/gw/secret.png",  # the gateway's own bucket: not listed
        "s3://team-bucket-evil/shared/cat.png",  # a look-alike bucket
        "s3://team-bucket/shared-evil/cat.png",  # a look-alike folder
        "s3://team-bucket/shared/../private/cat.png",
        "s3://team-bucket/shared/%2e%2e/private/cat.png",
        "S3://TEAM-BUCKET/private/cat.png",
    ],
)
def test_an_s3_image_outside_the_allowed_prefixes_is_refused_before_any_call(
    client: openai.OpenAI,
    gateway: GatewayProcess,
    upstream: FakeBedrock,
    backup: FakeOpenAI,
    url: str,
) -> None:
    balance = _balance(gateway)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="auto", messages=_image_message(url))
    assert caught.value.status_code == 400 and caught.value.code == "invalid_request"
    body = cast(dict[str, Any], caught.value.body)
    assert [d["field"] for d in body["details"]] == ["messages[0].content[1].image_url.url"]
    assert upstream.requests == [] and backup.requests == []  # not sent, not fallen back
    assert _balance(gateway) == balance


def test_an_s3_image_under_an_allowed_prefix_goes_to_bedrock_canonical(
    client: openai.OpenAI, upstream: FakeBedrock
) -> None:
    client.chat.completions.create(
        model="claude-bedrock", messages=_image_message("S3://Team-Bucket/shared/cats/tom.PNG")
    )
    (sent,) = upstream.requests
    image = sent.json["messages"][0]["content"][1]["image"]
    assert image == {
        "format": "png",
        "source": {"s3Location": {"uri": "s3://team-bucket/shared/cats/tom.PNG"}},
    }


def test_an_s3_image_source_through_the_messages_translation_is_refused(
    gateway: GatewayProcess, upstream: FakeBedrock, backup: FakeOpenAI
) -> None:
    upstream.requests.clear()
    backup.requests.clear()
    balance = _balance(gateway)
    root = gateway.base_url.removesuffix("/v1")
    claude = anthropic.Anthropic(base_url=root, api_key=gateway.api_key, max_retries=0)
    with claude, pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model="claude-bedrock",
            max_tokens=64,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Describe this."},
                        {
                            "type": "image",
                            "source": {"type": "url", "url": "s3://gateway-artifacts/x.png"},
                        },
                    ],
                }
            ],
        )
    assert caught.value.status_code == 400
    assert "s3://" in caught.value.message
    assert upstream.requests == [] and backup.requests == []
    assert _balance(gateway) == balance
