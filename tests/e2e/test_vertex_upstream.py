"""The gateway in front of Gemini on Vertex AI (a fake over real HTTP, with its token endpoint
verifying the service account's JWT against the key's public half), driven by the official
`openai` SDK, and once by the `anthropic` SDK through `/v1/messages`: one token exchange for
many calls, answers, streams, tools, errors, image-token usage, a fallback, and Cloud Storage
objects refused unless under the provider's `allowed_storage_prefixes`."""

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

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.recorded import load
from tests.fakes.vertex_upstream import (
    FakeVertex,
    Reply,
    ServiceAccountKey,
    StreamReply,
    candidate,
    function_call,
    response,
    text,
)
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import backup_chat

KEY = ServiceAccountKey.generate()
CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.vertex]
kind = "vertex"
project = "test-project"
location = "europe-west4"
base_url = "{vertex}"
credentials_file = "{key_file}"
token_url = "{token_url}"
timeout_seconds = 2
stream_read_timeout_seconds = 2
allowed_storage_prefixes = ["gs://team-bucket/shared/"]

[[models]]
id = "gemini-vertex"
provider = "vertex"
upstream_model = "gemini-2.5-flash"
capability = "chat"
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 0.3, output_usd_per_mtok = 2.5, \
cached_input_usd_per_mtok = 0.03 }}

{backup_chat}
[tenants.default]
"""
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hello"}]
PATH = "/v1/projects/test-project/locations/europe-west4/publishers/google/models/gemini-2.5-flash:"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeVertex]:
    fake = FakeVertex(KEY)
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    upstream: FakeVertex, backup: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-vertex")
    key_file = workdir / "service-account.json"
    key_file.write_text(json.dumps(KEY.info()))
    config = CONFIG.format(
        vertex=upstream.base_url,
        key_file=key_file,
        token_url=upstream.token_url,
        backup_chat=backup_chat("gemini-vertex", backup.base_url),
    )
    process = start_gateway(workdir, config)
    yield process
    process.stop()


@pytest.fixture
def client(
    gateway: GatewayProcess, upstream: FakeVertex, backup: FakeOpenAI
) -> Iterator[openai.OpenAI]:
    upstream.requests.clear()
    backup.requests.clear()
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


def test_answers_with_one_token_for_many_calls(client: openai.OpenAI, upstream: FakeVertex) -> None:
    for _ in range(3):
        completion = client.chat.completions.create(
            model="gemini-vertex", messages=MESSAGES, max_tokens=20
        )
        assert completion.choices[0].message.content == upstream.text
    assert [r.path for r in upstream.requests] == [PATH + "generateContent"] * 3
    assert upstream.tokens_issued == 1  # the first call of the module exchanged the JWT
    assert upstream.token_requests[0].claims is not None
    assert upstream.token_requests[0].claims["iss"] == KEY.email
    assert upstream.unauthorized == 0
    assert {r.headers["authorization"] for r in upstream.requests} == {"Bearer ya29.fake-1"}


def test_a_stream_reassembled(client: openai.OpenAI, upstream: FakeVertex) -> None:
    stream = client.chat.completions.create(
        model="gemini-vertex",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert upstream.requests[-1].path == PATH + "streamGenerateContent?alt=sse"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == upstream.text
    final = chunks[-1]
    assert final.choices == [] and final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (12, 6)


def test_the_recorded_thinking_stream(client: openai.OpenAI, upstream: FakeVertex) -> None:
    events = [f"data: {e}\r\n\r\n".encode() for e in load("vertex_thinking_stream")["events"]]
    upstream.enqueue(StreamReply(events=events))
    stream = client.chat.completions.create(
        model="gemini-vertex",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        reasoning_effort="low",
    )
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content.endswith("our eyes are more sensitive to blue).")
    final = chunks[-1].usage
    assert final is not None and final.completion_tokens == 134 + 1067
    assert final.completion_tokens_details is not None
    assert final.completion_tokens_details.reasoning_tokens == 1067


def test_tool_calls_round_trip(client: openai.OpenAI, upstream: FakeVertex) -> None:
    tools: list[ChatCompletionToolParam] = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    call = function_call("get_weather", {"city": "Paris"}, signature="c2lnLXZlcnRleA==")
    upstream.enqueue(Reply(body=response(candidate(call))))
    first = client.chat.completions.create(
        model="gemini-vertex", messages=MESSAGES, tools=tools, tool_choice="auto"
    )
    assert first.choices[0].message.tool_calls is not None
    (tool_call,) = first.choices[0].message.tool_calls
    assert isinstance(tool_call, ChatCompletionMessageFunctionToolCall)
    assert json.loads(tool_call.function.arguments) == {"city": "Paris"}
    assistant = first.choices[0].message.model_dump(exclude_none=True)
    client.chat.completions.create(
        model="gemini-vertex",
        messages=[
            *MESSAGES,
            cast(ChatCompletionMessageParam, assistant),
            {"role": "tool", "tool_call_id": tool_call.id, "content": "18C"},
        ],
        tools=tools,
    )
    turns = upstream.requests[-1].json["contents"]
    assert turns[1]["parts"][0]["thoughtSignature"] == "c2lnLXZlcnRleA=="
    assert turns[2]["parts"][0]["functionResponse"]["response"] == {"content": "18C"}


def test_cache_and_image_tokens_are_reported_and_billed(
    client: openai.OpenAI, upstream: FakeVertex
) -> None:
    cached = load("vertex_implicit_caching")["body"]
    upstream.enqueue(Reply(body=cached))
    completion = client.chat.completions.create(model="gemini-vertex", messages=MESSAGES)
    used = completion.usage
    assert used is not None and (used.prompt_tokens, used.completion_tokens) == (12013, 88)
    assert used.prompt_tokens_details is not None
    assert used.prompt_tokens_details.cached_tokens == 11243
    # (770 x 0.3 + 11243 x 0.03 + 88 x 2.5) / 1e6 USD x 1000 credits per USD
    assert (used.model_extra or {})["credits"] == "0.7883"
    pictured = response(
        candidate(text("A picture.")),
        usage_metadata=load("vertex_image_output_usage")["usageMetadata"],
    )
    upstream.enqueue(Reply(body=pictured))
    image = client.chat.completions.create(model="gemini-vertex", messages=MESSAGES).usage
    assert image is not None and image.completion_tokens_details is not None
    assert (image.completion_tokens_details.model_extra or {})["image_tokens"] == 258


@pytest.mark.parametrize(
    ("reply", "sdk_error", "status", "code"),
    [
        (
            Reply.error(400, "INVALID_ARGUMENT", "Unable to submit request"),
            openai.BadRequestError,
            400,
            "invalid_request",
        ),
        (
            Reply.error(429, "RESOURCE_EXHAUSTED", "Resource exhausted."),
            openai.InternalServerError,
            503,
            "model_unavailable",
        ),
        (
            Reply(status=403, body=load("vertex_permission_denied")["body"]),
            openai.InternalServerError,
            502,
            "upstream_error",
        ),
        (
            Reply.error(504, "DEADLINE_EXCEEDED", "Deadline expired"),
            openai.InternalServerError,
            504,
            "upstream_timeout",
        ),
    ],
)
def test_errors_by_kind(
    client: openai.OpenAI,
    upstream: FakeVertex,
    reply: Reply,
    sdk_error: type[openai.APIStatusError],
    status: int,
    code: str,
) -> None:
    upstream.enqueue(reply)
    with pytest.raises(sdk_error) as caught:
        client.chat.completions.create(model="gemini-vertex", messages=MESSAGES)
    assert caught.value.status_code == status and caught.value.code == code
    assert "ya29." not in caught.value.response.text


def test_an_unavailable_vertex_falls_back(
    client: openai.OpenAI, upstream: FakeVertex, backup: FakeOpenAI
) -> None:
    upstream.enqueue(Reply.error(503, "UNAVAILABLE", "The service is currently unavailable."))
    raw = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    assert raw.parse().choices[0].message.content == backup.text
    assert raw.headers["x-gateway-model"] == "backup-chat"
    assert len(upstream.requests) == 1 and len(backup.requests) == 1


def test_the_messages_api_through_the_translation(
    gateway: GatewayProcess, upstream: FakeVertex
) -> None:
    root = gateway.base_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key=gateway.api_key, max_retries=0) as claude:
        message = claude.messages.create(
            model="gemini-vertex", max_tokens=64, messages=[{"role": "user", "content": "Hello"}]
        )
    (block,) = message.content
    assert block.type == "text" and block.text == upstream.text
    assert message.stop_reason == "end_turn"
    assert upstream.requests[-1].path == PATH + "generateContent"


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
        "gs://gateway-artifacts/gw/secret.png",  # the gateway's own bucket: not listed
        "gs://team-bucket-evil/shared/cat.png",
        "gs://team-bucket/shared/../private/cat.png",
        "https://storage.googleapis.com/team-bucket/private/cat.png",
    ],
)
def test_a_storage_object_outside_the_allowed_prefixes_is_refused_before_any_call(
    client: openai.OpenAI,
    gateway: GatewayProcess,
    upstream: FakeVertex,
    backup: FakeOpenAI,
    url: str,
) -> None:
    balance = _balance(gateway)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="auto", messages=_image_message(url), stream=True)
    assert caught.value.status_code == 400 and caught.value.code == "invalid_request"
    body = cast(dict[str, Any], caught.value.body)
    assert [d["field"] for d in body["details"]] == ["messages[0].content[1].image_url.url"]
    assert upstream.requests == [] and backup.requests == []
    assert _balance(gateway) == balance


def test_a_storage_object_under_an_allowed_prefix_goes_to_vertex(
    client: openai.OpenAI, upstream: FakeVertex
) -> None:
    client.chat.completions.create(
        model="gemini-vertex", messages=_image_message("gs://Team-Bucket/shared/cat.png")
    )
    (sent,) = upstream.requests
    assert sent.json["contents"][0]["parts"][1] == {
        "fileData": {"fileUri": "gs://team-bucket/shared/cat.png", "mimeType": "image/png"}
    }
