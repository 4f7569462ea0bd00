"""The Bedrock adapter's requests: what Converse receives for an OpenAI body, signed with the
credentials botocore's chain finds (environment, profile files, container and instance
metadata endpoints), checked by the fake as AWS checks them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from providers.bedrock import Options, create
from providers.bedrock.request import converse_request
from providers.errors import ProviderError, UpstreamRejectedRequest
from tests.fakes.aws_metadata import FakeAwsMetadata
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.providers.adapter_checks import assert_refused_is_unavailable
from tests.providers.bedrock_support import (
    BODY,
    KEY,
    MODEL,
    SECRET,
    STREAM_BODY,
    collect,
    run,
    upstream,
)

PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9"
    "awAAAABJRU5ErkJggg=="
)


def test_a_call_is_signed_and_goes_to_the_models_percent_encoded_path(
    aws_env: pytest.MonkeyPatch,
) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            await provider.complete(BODY)
            await collect(provider, STREAM_BODY)
        assert [r.path for r in fake.requests] == [
            "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse",
            "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream",
        ]
        assert fake.signed_by == [KEY, KEY]
        first, second = fake.requests
        assert first.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY}/")
        assert "/us-east-1/bedrock/aws4_request" in first.headers["authorization"]
        assert second.headers["accept"] == "application/vnd.amazon.eventstream"
        assert "x-amz-security-token" not in first.headers
        assert first.json == {
            "messages": [{"role": "user", "content": [{"text": "What is the weather in Paris?"}]}],
            "inferenceConfig": {"maxTokens": 256},
        }

    run(test)


def test_a_model_arn_is_one_path_segment(aws_env: pytest.MonkeyPatch) -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku"

    async def test() -> None:
        async with upstream() as (fake, provider):
            await provider.complete({**BODY, "model": arn})
        assert fake.requests[0].path == (
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile"
            "%2Fus.anthropic.claude-3-haiku/converse"
        )
        assert fake.signed_by == [KEY]

    run(test)


def test_a_body_changed_after_signing_is_refused_as_aws_would(
    aws_env: pytest.MonkeyPatch,
) -> None:
    """The fake recomputes the signature from what arrived: a wrong secret fails there."""
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")

    async def test() -> None:
        async with upstream() as (fake, provider):
            with pytest.raises(ProviderError) as caught:
                await provider.complete(BODY)
        assert "InvalidSignatureException" in caught.value.message
        assert type(caught.value) is ProviderError and caught.value.upstream_status == 403
        assert fake.signed_by == []

    run(test)


def test_a_session_token_is_sent_and_signed(aws_env: pytest.MonkeyPatch) -> None:
    aws_env.setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEBYaDTEST")

    async def test() -> None:
        async with FakeBedrock(credentials=(KEY, SECRET, "FwoGZXIvYXdzEBYaDTEST")) as fake:
            provider = create("b", Options(base_url=fake.base_url, region="us-east-1"))
            try:
                await provider.complete(BODY)
            finally:
                await provider.close()
        headers = fake.requests[0].headers
        assert headers["x-amz-security-token"] == "FwoGZXIvYXdzEBYaDTEST"
        assert "x-amz-security-token" in headers["authorization"]
        assert fake.signed_by == [KEY]

    run(test)


def test_a_named_profile_of_the_shared_files(aws_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    aws_env.delenv("AWS_ACCESS_KEY_ID")
    aws_env.delenv("AWS_SECRET_ACCESS_KEY")
    (tmp_path / "aws-credentials").write_text(
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = wrong\n\n"
        f"[gateway]\naws_access_key_id = {KEY}\naws_secret_access_key = {SECRET}\n"
    )

    async def test() -> None:
        async with upstream(profile="gateway") as (fake, provider):
            await provider.complete(BODY)
        assert fake.signed_by == [KEY]

    run(test)


def test_the_container_endpoint_and_renewal_before_expiry(aws_env: pytest.MonkeyPatch) -> None:
    """Credentials of an ECS task (or EKS Pod Identity). A set that expires within botocore's
    refresh window (10 minutes) is renewed before a call uses it, never sent to expire on the
    way: the first set, already inside the window, is replaced before the first call."""
    aws_env.delenv("AWS_ACCESS_KEY_ID")
    aws_env.delenv("AWS_SECRET_ACCESS_KEY")
    rotated = [
        ("ASIAFIRST", "first-secret", "token-1"),
        ("ASIASECOND", "second-secret", "token-2"),
        ("ASIATHIRD", "third-secret", "token-3"),
    ]

    async def test() -> None:
        async with FakeAwsMetadata(rotated, lifetime=300, authorization="task-auth") as meta:
            aws_env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", meta.container_url)
            aws_env.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "task-auth")
            async with FakeBedrock(credentials=rotated) as fake:
                provider = create("b", Options(base_url=fake.base_url, region="us-east-1"))
                try:
                    await provider.complete(BODY)
                    await provider.complete(BODY)
                finally:
                    await provider.close()
        assert fake.signed_by == ["ASIASECOND", "ASIATHIRD"]
        assert meta.container_requests == 3
        assert [r.headers["x-amz-security-token"] for r in fake.requests] == ["token-2", "token-3"]

    run(test)


def test_long_lived_container_credentials_are_fetched_once(aws_env: pytest.MonkeyPatch) -> None:
    aws_env.delenv("AWS_ACCESS_KEY_ID")
    aws_env.delenv("AWS_SECRET_ACCESS_KEY")
    keys = [("ASIALONG", "long-secret", "token-long")]

    async def test() -> None:
        async with FakeAwsMetadata(keys, lifetime=3600) as meta:
            aws_env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", meta.container_url)
            async with FakeBedrock(credentials=keys) as fake:
                provider = create("b", Options(base_url=fake.base_url, region="us-east-1"))
                try:
                    for _ in range(3):
                        await provider.complete(BODY)
                finally:
                    await provider.close()
        assert fake.signed_by == ["ASIALONG"] * 3
        assert meta.container_requests == 1

    run(test)


def test_the_instance_metadata_service(aws_env: pytest.MonkeyPatch) -> None:
    aws_env.delenv("AWS_ACCESS_KEY_ID")
    aws_env.delenv("AWS_SECRET_ACCESS_KEY")
    keys = [("ASIAINSTANCE", "instance-secret", "instance-token")]

    async def test() -> None:
        async with FakeAwsMetadata(keys) as meta:
            aws_env.setenv("AWS_EC2_METADATA_DISABLED", "false")
            aws_env.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", meta.imds_url)
            async with FakeBedrock(credentials=keys) as fake:
                provider = create("b", Options(base_url=fake.base_url, region="us-east-1"))
                try:
                    await provider.complete(BODY)
                finally:
                    await provider.close()
        assert fake.signed_by == ["ASIAINSTANCE"]
        assert meta.imds_requests == 1
        assert "/latest/api/token" in meta.requests  # IMDSv2: a session token first

    run(test)


def test_no_credentials_anywhere_is_a_provider_error_on_the_first_call(
    aws_env: pytest.MonkeyPatch,
) -> None:
    aws_env.delenv("AWS_ACCESS_KEY_ID")
    aws_env.delenv("AWS_SECRET_ACCESS_KEY")

    async def test() -> None:
        async with upstream() as (fake, provider):
            with pytest.raises(ProviderError, match="no AWS credentials"):
                await provider.complete(BODY)
        assert fake.requests == []

    run(test)


def test_a_bedrock_api_key_is_a_bearer_token_instead(aws_env: pytest.MonkeyPatch) -> None:
    aws_env.setenv("BEDROCK_KEY_FOR_TEST", "bedrock-api-key-value")

    async def test() -> None:
        async with FakeBedrock(bearer="bedrock-api-key-value") as fake:
            options = Options(
                base_url=fake.base_url, region="us-west-2", api_key_env="BEDROCK_KEY_FOR_TEST"
            )
            provider = create("b", options)
            try:
                await provider.complete(BODY)
            finally:
                await provider.close()
        headers = fake.requests[0].headers
        assert headers["authorization"] == "Bearer bedrock-api-key-value"
        assert "x-amz-date" not in headers

    run(test)


def test_the_default_endpoint_is_the_regions() -> None:
    assert (
        Options(region="eu-central-1").endpoint()
        == "https://bedrock-runtime.eu-central-1.amazonaws.com"
    )


def test_a_refused_connection_is_unavailable(aws_env: pytest.MonkeyPatch) -> None:
    def make(url: str) -> Any:
        return create("b", Options(base_url=url.removesuffix("/v1"), region="us-east-1"))

    run(lambda: assert_refused_is_unavailable(make, BODY))


# --- the request, translated (no server needed) ----------------------------------------------


def test_messages_tools_and_sampling() -> None:
    body = {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "w", "arguments": '{"c":"Paris"}'},
                    },
                    {
                        "id": "t2",
                        "type": "function",
                        "function": {"name": "w", "arguments": '{"c":"Rome"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "18C"},
            {"role": "tool", "tool_call_id": "t2", "content": [{"type": "text", "text": "21C"}]},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "w",
                    "description": "Weather",
                    "parameters": {"type": "object", "properties": {"c": {"type": "string"}}},
                },
            }
        ],
        "tool_choice": "auto",
        "max_completion_tokens": 300,
        "temperature": 0.3,
        "top_p": 0.9,
        "stop": "END",
        "seed": 7,
        "frequency_penalty": 0.5,
        "user": "u-1",
    }
    assert converse_request(body) == {
        "system": [{"text": "Be brief."}, {"text": "Use metric units."}],
        "messages": [
            {"role": "user", "content": [{"text": "Weather in Paris and Rome?"}]},
            {
                "role": "assistant",
                "content": [
                    {"toolUse": {"toolUseId": "t1", "name": "w", "input": {"c": "Paris"}}},
                    {"toolUse": {"toolUseId": "t2", "name": "w", "input": {"c": "Rome"}}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "t1", "content": [{"text": "18C"}]}},
                    {"toolResult": {"toolUseId": "t2", "content": [{"text": "21C"}]}},
                ],
            },
        ],
        "inferenceConfig": {
            "maxTokens": 300,
            "temperature": 0.3,
            "topP": 0.9,
            "stopSequences": ["END"],
        },
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "w",
                        "description": "Weather",
                        "inputSchema": {
                            "json": {"type": "object", "properties": {"c": {"type": "string"}}}
                        },
                    }
                }
            ],
            "toolChoice": {"auto": {}},
        },
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("required", {"any": {}}),
        ({"type": "function", "function": {"name": "w"}}, {"tool": {"name": "w"}}),
    ],
)
def test_forced_tool_choices(choice: object, expected: dict[str, Any]) -> None:
    body = {
        **BODY,
        "tools": [{"type": "function", "function": {"name": "w"}}],
        "tool_choice": choice,
    }
    config = converse_request(body)["toolConfig"]
    assert config["toolChoice"] == expected
    assert config["tools"][0]["toolSpec"]["inputSchema"] == {
        "json": {"type": "object", "properties": {}}
    }


def test_tool_choice_none_sends_no_tools_unless_the_history_needs_them() -> None:
    tools = [{"type": "function", "function": {"name": "w"}}]
    assert "toolConfig" not in converse_request({**BODY, "tools": tools, "tool_choice": "none"})
    history = [
        *BODY["messages"],
        {
            "role": "assistant",
            "tool_calls": [{"id": "t", "function": {"name": "w", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "t", "content": "ok"},
    ]
    kept = converse_request({**BODY, "messages": history, "tools": tools, "tool_choice": "none"})
    assert "toolChoice" not in kept["toolConfig"] and kept["toolConfig"]["tools"]


def test_images_as_bytes_or_s3_locations_under_an_allowed_prefix() -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"},
        },
        {"type": "image_url", "image_url": {"url": "s3://bucket/photos/cat.JPG"}},
    ]
    request = converse_request(
        {**BODY, "messages": [{"role": "user", "content": content}]},
        storage_prefixes=("s3://bucket/photos/",),
    )
    assert request["messages"][0]["content"] == [
        {"text": "What is this?"},
        {"image": {"format": "png", "source": {"bytes": PNG}}},
        {
            "image": {
                "format": "jpeg",
                "source": {"s3Location": {"uri": "s3://bucket/photos/cat.JPG"}},
            }
        },
    ]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"n": 2}, "n:"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"modalities": ["text", "audio"]}, "audio"),
        ({"web_search_options": {}}, "web_search_options"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
                    }
                ]
            },
            "only data: and s3://",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image_url",
                                "image_url": {"url": "data:image/bmp;base64,AAAA"},
                            }
                        ],
                    }
                ]
            },
            "PNG, JPEG, GIF or WebP",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}
                        ],
                    }
                ]
            },
            "input_audio",
        ),
        ({"messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "t", "function": {"name": "w", "arguments": "[1]"}}],
                    }
                ]
            },
            "not a JSON object",
        ),
        (
            {"model": "meta.llama3-70b-instruct-v1:0", "reasoning_effort": "high"},
            "reasoning_effort",
        ),
        ({"reasoning_effort": "low", "max_completion_tokens": 1000}, "max_completion_tokens"),
    ],
)
def test_what_converse_cannot_carry_is_refused(change: dict[str, Any], named: str) -> None:
    with pytest.raises(UpstreamRejectedRequest) as refused:
        converse_request({**BODY, **change})
    assert named in refused.value.message


def test_reasoning_is_each_familys_own_switch() -> None:
    claude = converse_request({**BODY, "reasoning_effort": "medium", "max_completion_tokens": 4000})
    assert claude["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 3999}
    }
    nova = converse_request(
        {**BODY, "model": "us.amazon.nova-2-lite-v1:0", "reasoning_effort": "high"}
    )
    assert nova["additionalModelRequestFields"] == {
        "reasoningConfig": {"type": "enabled", "maxReasoningEffort": "high"}
    }
    oss = converse_request({**BODY, "model": "openai.gpt-oss-120b-1:0", "reasoning_effort": "low"})
    assert oss["additionalModelRequestFields"] == {"reasoning_effort": "low"}
    assert "additionalModelRequestFields" not in converse_request(
        {**BODY, "reasoning_effort": "none"}
    )


def test_signed_reasoning_goes_back_and_a_dropped_one_turns_thinking_off() -> None:
    signed = {"type": "thinking", "thinking": "Let me look.", "signature": "c2ln"}
    redacted = {"type": "redacted_thinking", "data": "cmVkYWN0ZWQ="}
    call = {"id": "t1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
    loop = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call],
            "thinking_blocks": [signed, redacted],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "18C"},
    ]
    body = {**BODY, "messages": loop, "reasoning_effort": "low", "max_completion_tokens": 4000}
    request = converse_request(body)
    assert request["messages"][1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "Let me look.", "signature": "c2ln"}}},
        {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ="}},
        {"toolUse": {"toolUseId": "t1", "name": "w", "input": {}}},
    ]
    assert request["additionalModelRequestFields"]["thinking"]["budget_tokens"] == 2048
    dropped = [loop[0], {**loop[1], "thinking_blocks": None}, loop[2]]
    assert "additionalModelRequestFields" not in converse_request({**body, "messages": dropped})


def test_cache_points_after_the_system_prompt_and_the_tools(aws_env: pytest.MonkeyPatch) -> None:
    body = {
        **BODY,
        "messages": [{"role": "system", "content": "Long instructions."}, *BODY["messages"]],
        "tools": [{"type": "function", "function": {"name": "w"}}],
    }

    async def test() -> None:
        async with upstream(cache_points=[MODEL]) as (fake, provider):
            await provider.complete(body)
            await provider.complete({**body, "model": "amazon.nova-pro-v1:0"})
        cached, plain = (r.json for r in fake.requests)
        assert cached["system"] == [
            {"text": "Long instructions."},
            {"cachePoint": {"type": "default"}},
        ]
        assert cached["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default"}}
        assert plain["system"] == [{"text": "Long instructions."}]
        assert all("cachePoint" not in tool for tool in plain["toolConfig"]["tools"])

    run(test)


def _image_body(url: str) -> dict[str, Any]:
    content = [{"type": "text", "text": "?"}, {"type": "image_url", "image_url": {"url": url}}]
    return {**BODY, "messages": [{"role": "user", "content": content}]}


@pytest.mark.parametrize(
    ("prefixes", "url"),
    [
        ((), "s3://bucket/photos/cat.png"),
        (("s3://bucket/",), "s3://bucket-evil/photos/cat.png"),
        (("s3://bucket/photos/",), "s3://bucket/photos-evil/cat.png"),
        (("s3://bucket/photos/",), "s3://bucket/photos/../private/cat.png"),
        (("s3://bucket/photos/",), "s3://bucket/photos/%2E%2E/private/cat.png"),
    ],
)
def test_an_s3_image_outside_the_prefixes_is_refused_before_sending(
    aws_env: pytest.MonkeyPatch, prefixes: tuple[str, ...], url: str
) -> None:
    async def test() -> None:
        async with upstream(allowed_storage_prefixes=prefixes) as (fake, provider):
            for call, body in ((provider.complete, BODY), (provider.stream, STREAM_BODY)):
                with pytest.raises(UpstreamRejectedRequest) as caught:
                    await call({**body, **_image_body(url)})
                assert caught.value.field == "messages[0].content[1].image_url.url"
            assert fake.requests == []

    run(test)


def test_an_s3_image_under_an_allowed_prefix_is_sent_canonical(
    aws_env: pytest.MonkeyPatch,
) -> None:
    async def test() -> None:
        prefixes = ("S3://Bucket/photos",)  # read as s3://bucket/photos/
        async with upstream(allowed_storage_prefixes=prefixes) as (fake, provider):
            await provider.complete(_image_body("s3://BUCKET/photos/cat.jpg"))
        (sent,) = fake.requests
        source = sent.json["messages"][0]["content"][1]["image"]["source"]
        assert source == {"s3Location": {"uri": "s3://bucket/photos/cat.jpg"}}

    run(test)


@pytest.mark.parametrize("prefix", ["gs://bucket/", "s3://", "s3://bucket/a/../b/", "https://x/"])
def test_a_storage_prefix_that_is_not_an_s3_folder_is_a_config_error(prefix: str) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"region": "us-east-1", "allowed_storage_prefixes": [prefix]}, Options)
