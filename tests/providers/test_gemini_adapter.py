"""The Gemini adapter against a real local fake upstream: its options, and what Gemini
receives (contents, tools, tool choice, response schemas), or what is refused before sending."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from providers.errors import UpstreamRejectedRequest
from providers.gemini import Options
from providers.registry import spec_for
from tests.providers.gemini_support import BODY, STREAM_BODY, collect, run, upstream

WEATHER_PARAMS = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "city": {"type": "string", "description": "City name", "format": "hostname"},
        "unit": {"type": ["string", "null"], "enum": ["C", "F"], "default": "C"},
        "days": {"type": "integer", "minimum": 1, "format": "int32"},
    },
    "required": ["city", "unit", "ghost"],
}


GEMINI_WEATHER_PARAMS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["C", "F"], "nullable": True},
        "days": {"type": "integer", "minimum": 1, "format": "int32"},
    },
    "required": ["city", "unit"],
}


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather now",
            "parameters": WEATHER_PARAMS,
            "strict": True,
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]


def test_registry_options_and_defaults() -> None:
    spec = spec_for("gemini")
    assert spec.capabilities == frozenset({"chat", "embeddings"})
    assert spec.options_type is Options
    assert Options().base_url == "https://generativelanguage.googleapis.com/v1beta"
    with pytest.raises(msgspec.ValidationError, match="include_thougths"):
        msgspec.convert({"include_thougths": True}, Options)
    with pytest.raises(msgspec.ValidationError, match="base_url"):
        msgspec.convert({"base_url": "generativelanguage.googleapis.com"}, Options)


def test_urls_key_header_and_pooling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_TEST_GEMINI_KEY", "g-env")

    async def test() -> None:
        async with upstream(api_key="g-config", api_key_env="GATEWAY_TEST_GEMINI_KEY") as (
            fake,
            provider,
        ):
            await provider.complete(BODY)
            await collect(provider, STREAM_BODY)
            await provider.complete({**BODY, "model": "tunedModels/my-tune"})
            plain, streamed, tuned = fake.requests
            assert plain.method == "POST"
            assert plain.path == "/v1beta/models/gemini-2.5-flash:generateContent"
            assert streamed.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
            assert tuned.path == "/v1beta/tunedModels/my-tune:generateContent"
            assert plain.headers["x-goog-api-key"] == "g-env"
            assert plain.headers["content-type"] == "application/json"
            assert "authorization" not in plain.headers
            assert plain.json == streamed.json  # `stream` and `stream_options` are not sent
            assert plain.client_port == streamed.client_port == tuned.client_port

    run(test)


def test_the_request_gemini_receives() -> None:
    body: dict[str, Any] = {
        "model": "gemini-3-pro-preview",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Also look at these:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.com/cat.jpg?v=2", "detail": "high"},
                    },
                    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "mp3"}},
                    {
                        "type": "file",
                        "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a"},
                    },
                    {"type": "image_url", "image_url": {"url": "data:text/plain,hi%20there"}},
                ],
            },
            {
                "role": "assistant",
                "content": "Checking both.",
                "reasoning_content": "not sent back",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        "extra_content": {"google": {"thought_signature": "c2lnLWE="}},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_b", "content": "21C"},
            {
                "role": "tool",
                "tool_call_id": "call_a",
                "content": [{"type": "text", "text": "18C"}],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_c",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": ""},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_c", "content": "noon"},
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": TOOLS,
        "tool_choice": "required",
        "temperature": 0.3,
        "top_p": None,
        "max_completion_tokens": 256,
        "stop": ["END"],
        "n": 2,
        "seed": 7,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "logprobs": True,
        "top_logprobs": 3,
        "response_format": {"type": "json_object"},
        "reasoning_effort": "low",
        "parallel_tool_calls": True,
        "logit_bias": {"15": 2},
        "user": "u-1",
        "metadata": {"team": "a"},
        "stream_options": {"include_usage": True},
    }
    expected = {
        "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Use metric units."}]},
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Weather in Paris and Rome?"},
                    {"text": "Also look at these:"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}},
                    {
                        "fileData": {
                            "fileUri": "https://example.com/cat.jpg?v=2",
                            "mimeType": "image/jpeg",
                        }
                    },
                    {"inlineData": {"mimeType": "audio/mp3", "data": "UklGRg=="}},
                    {"inlineData": {"mimeType": "application/pdf", "data": "JVBE"}},
                    {"inlineData": {"mimeType": "text/plain", "data": "aGkgdGhlcmU="}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "Checking both."},
                    {
                        "functionCall": {
                            "name": "get_weather",
                            "args": {"city": "Paris"},
                            "id": "call_a",
                        },
                        "thoughtSignature": "c2lnLWE=",
                    },
                    {
                        "functionCall": {
                            "name": "get_weather",
                            "args": {"city": "Rome"},
                            "id": "call_b",
                        }
                    },
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "get_weather",
                            "response": {"content": "21C"},
                            "id": "call_b",
                        }
                    },
                    {
                        "functionResponse": {
                            "name": "get_weather",
                            "response": {"content": "18C"},
                            "id": "call_a",
                        }
                    },
                ],
            },
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "get_time", "args": {}, "id": "call_c"},
                        "thoughtSignature": "skip_thought_signature_validator",
                    }
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "get_time",
                            "response": {"content": "noon"},
                            "id": "call_c",
                        }
                    },
                    {"text": "Thanks!"},
                ],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Weather now",
                        "parameters": GEMINI_WEATHER_PARAMS,
                    },
                    {"name": "get_time"},
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "generationConfig": {
            "temperature": 0.3,
            "maxOutputTokens": 256,
            "candidateCount": 2,
            "seed": 7,
            "presencePenalty": 0.5,
            "frequencyPenalty": -0.5,
            "logprobs": 3,
            "stopSequences": ["END"],
            "responseLogprobs": True,
            "responseMimeType": "application/json",
            "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
        },
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    }

    async def test() -> None:
        safety = {"HARM_CATEGORY_HARASSMENT": "BLOCK_NONE"}
        async with upstream(include_thoughts=True, safety_settings=safety) as (fake, provider):
            await provider.complete(body)
            assert fake.requests[0].json == expected
            # Older models get no stand-in signature and no call ids; no options, no extras.
            older = {**body, "model": "gemini-2.5-flash", "stop": "END", "reasoning_effort": "none"}
            await provider.complete(older)
            sent = fake.requests[1].json
            assert sent["contents"][3]["parts"][0] == {
                "functionCall": {"name": "get_time", "args": {}}
            }
            assert sent["generationConfig"]["stopSequences"] == ["END"]
            assert sent["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}

    run(test)


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("none", {"mode": "NONE"}),
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY"}),
        (
            {"type": "function", "function": {"name": "get_time"}},
            {"mode": "ANY", "allowedFunctionNames": ["get_time"]},
        ),
        (None, None),
    ],
)
def test_tool_choice(choice: Any, config: dict[str, Any] | None) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            body = {**BODY, "tools": TOOLS}
            if choice is not None:
                body["tool_choice"] = choice
            await provider.complete(body)
            sent = fake.requests[0].json
            assert sent.get("toolConfig") == (config and {"functionCallingConfig": config})
            assert "generationConfig" in sent and "thinkingConfig" not in sent["generationConfig"]

    run(test)


def test_json_schema_becomes_a_response_schema() -> None:
    schema = {
        "$defs": {
            "Place": {
                "title": "Place",
                "type": "object",
                "properties": {
                    "name": {"type": "string", "format": "email"},
                    "near": {"$ref": "#/$defs/Place"},
                },
                "required": ["name"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {
            "place": {"$ref": "#/$defs/Place", "description": "where"},
            "kind": {"const": "city"},
            "score": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
            "tags": {
                "type": "array",
                "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "when": {"allOf": [{"type": "string", "format": "date-time"}], "title": "When"},
        },
        "required": ["place", "kind"],
        "additionalProperties": False,
    }
    expected = {
        "type": "object",
        "properties": {
            "place": {
                "type": "object",
                "description": "where",
                "properties": {"name": {"type": "string"}, "near": {"type": "object"}},
                "required": ["name"],
            },
            "kind": {"type": "string", "enum": ["city"]},
            "score": {"type": "number", "nullable": True},
            "tags": {
                "type": "array",
                "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "when": {"type": "string", "format": "date-time"},
        },
        "required": ["place", "kind"],
    }

    async def test() -> None:
        async with upstream() as (fake, provider):
            strict = {"name": "answer", "schema": schema, "strict": True}
            await provider.complete(
                {**BODY, "response_format": {"type": "json_schema", "json_schema": strict}}
            )
            await provider.complete({**BODY, "response_format": {"type": "text"}})
            first, second = (r.json["generationConfig"] for r in fake.requests)
            assert first == {
                "maxOutputTokens": 256,
                "responseMimeType": "application/json",
                "responseSchema": expected,
            }
            assert second == {"maxOutputTokens": 256}

    run(test)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"messages": [{"role": "tool", "tool_call_id": "call_x", "content": "1"}]}, "call_x"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}
                ]
            },
            "file_id",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}],
                    }
                ]
            },
            "URLs",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1]"}}],
                    }
                ]
            },
            "not a JSON object",
        ),
        ({"web_search_options": {}}, "web_search_options"),
        ({"modalities": ["text", "audio"]}, "audio"),
    ],
)
def test_what_gemini_cannot_express_is_rejected_before_sending(
    change: dict[str, Any], words: str
) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            for call, body in ((provider.complete, BODY), (provider.stream, STREAM_BODY)):
                with pytest.raises(UpstreamRejectedRequest, match=words):
                    await call({**body, **change})
            assert fake.requests == []

    run(test)
