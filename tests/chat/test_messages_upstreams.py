"""A Messages API request as each kind of upstream is sent it: mid-conversation system
instructions in the form each understands, Anthropic's own body (every field, as the client
wrote it) on the passthrough, and the fields that only tune Anthropic's behaviour dropped for the
others and named in the outcome."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gateway.chat.outcomes import ChatCompleted
from gateway.errors import InvalidRequest
from tests.chat.upstream_fakes import (
    Upstreams,
    fake_upstreams,
    messages_call,
    messages_call_streamed,
)

REMINDER = "The user switched to plan mode: do not edit files."
CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": "a.py and b.py."},
    {"role": "system", "content": REMINDER},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Now open a.py."},
            {"type": "mid_conv_system", "content": [{"type": "text", "text": "Be brief."}]},
        ],
    },
]
BODY: dict[str, Any] = {
    "model": "openai",
    "max_tokens": 100,
    "system": [{"type": "text", "text": "You are a coding agent."}],
    "messages": CONVERSATION,
    "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
    "speed": None,
}


def _run(tmp_path: Path, test: Any) -> None:
    async def main() -> None:
        async with fake_upstreams(tmp_path) as upstreams:
            await test(upstreams)

    asyncio.run(main())


def test_the_passthrough_forwards_the_conversation_as_written(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        outcome = await messages_call(up.parts, {**BODY, "model": "anthropic"})
        assert up.anthropic.requests[-1].json == {**BODY, "model": "claude-up"}
        assert isinstance(outcome, ChatCompleted) and outcome.dropped == ()
        assert msgspec.json.decode(outcome.body)["id"].startswith("msg_")

    _run(tmp_path, test)


def test_openai_gets_system_messages_where_they_stand(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        outcome = await messages_call(up.parts, BODY)
        assert up.sent("openai")["messages"] == [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": "a.py and b.py."},
            {"role": "system", "content": REMINDER},
            {"role": "user", "content": [{"type": "text", "text": "Now open a.py."}]},
            {"role": "system", "content": "Be brief."},
        ]
        assert "context_management" not in up.sent("openai")
        assert outcome.dropped == ("context_management",)
        assert msgspec.json.decode(outcome.body)["id"].startswith("msg_")

    _run(tmp_path, test)


def test_gemini_folds_them_into_the_system_instruction(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        outcome = await messages_call(up.parts, {**BODY, "model": "gemini"})
        sent = up.sent("gemini")
        texts = [part["text"] for part in sent["systemInstruction"]["parts"]]
        assert texts == ["You are a coding agent.", REMINDER, "Be brief."]
        said = [part.get("text") for turn in sent["contents"] for part in turn["parts"]]
        assert said == ["List the files.", "a.py and b.py.", "Now open a.py."]
        assert outcome.dropped == ("context_management",)

    _run(tmp_path, test)


def test_bedrock_gets_them_as_system_blocks(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        outcome = await messages_call(up.parts, {**BODY, "model": "bedrock"})
        sent = up.sent("bedrock")
        texts = [block["text"] for block in sent["system"] if "text" in block]
        assert texts == ["You are a coding agent.", REMINDER, "Be brief."]
        assert [turn["role"] for turn in sent["messages"]] == ["user", "assistant", "user"]
        assert outcome.dropped == ("context_management",)

    _run(tmp_path, test)


def test_the_simulator_answers_a_mid_conversation_system_message(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        outcome = await messages_call(up.parts, {**BODY, "model": "sim"})
        answer = msgspec.json.decode(outcome.body)
        assert answer["type"] == "message" and answer["content"][0]["text"]
        assert outcome.dropped == ("context_management",)

    _run(tmp_path, test)


SEARCH_RESULT = {
    "type": "search_result",
    "source": "https://docs.example/a",
    "title": "Page A",
    "content": [{"type": "text", "text": "A says hello."}],
}
TEXT_DOCUMENT = {
    "type": "document",
    "title": "notes.txt",
    "source": {"type": "text", "media_type": "text/plain", "data": "Buy milk."},
}
FILE_DOCUMENT = {"type": "document", "source": {"type": "file", "file_id": "file_011CNha8i"}}
UNKNOWN = {"type": "hologram", "frames": 3}


@pytest.mark.parametrize("block", [FILE_DOCUMENT, UNKNOWN, TEXT_DOCUMENT, SEARCH_RESULT])
def test_a_turn_of_one_block_anthropic_takes_is_passed_through(
    tmp_path: Path, block: dict[str, Any]
) -> None:
    async def test(up: Upstreams) -> None:
        body = {
            "model": "anthropic",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": [block]}],
        }
        await messages_call(up.parts, body)
        assert up.anthropic.requests[-1].json == {**body, "model": "claude-up"}

    _run(tmp_path, test)


def test_documents_and_search_results_are_text_for_other_upstreams(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        body = {
            "model": "openai",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": [TEXT_DOCUMENT, SEARCH_RESULT]}],
        }
        await messages_call(up.parts, body)
        assert up.sent("openai")["messages"] == [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "notes.txt\n\nBuy milk."},
                    {"type": "text", "text": "Page A\nhttps://docs.example/a\n\nA says hello."},
                ],
            }
        ]

    _run(tmp_path, test)


@pytest.mark.parametrize(
    ("block", "field"),
    [
        (FILE_DOCUMENT, "messages[0].content[0].source.type"),
        (UNKNOWN, "messages[0].content[0].type"),
    ],
)
def test_what_another_upstream_cannot_carry_is_refused_naming_it(
    tmp_path: Path, block: dict[str, Any], field: str
) -> None:
    async def test(up: Upstreams) -> None:
        body = {
            "model": "openai",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": [block]}],
        }
        with pytest.raises(InvalidRequest) as refused:
            await messages_call(up.parts, body)
        assert [detail.field for detail in refused.value.details] == [field]
        assert up.openai.requests == []

    _run(tmp_path, test)


def test_a_json_schema_keeps_the_form_the_client_wrote(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        tool = {"name": "count", "input_schema": schema}
        body = {
            "model": "openai",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "Count."}],
            "output_config": {"format": {"type": "json_schema", "schema": schema}},
            "tools": [tool, {**tool, "name": "strict_count", "strict": True}],
        }
        await messages_call(up.parts, body)
        sent = up.sent("openai")
        assert sent["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": schema},
        }
        assert "strict" not in sent["tools"][0]["function"]
        assert sent["tools"][1]["function"]["strict"] is True

    _run(tmp_path, test)


def test_a_stream_from_gemini_starts_with_its_prompt_count(tmp_path: Path) -> None:
    """Gemini reports the prompt's count with its first chunk: `message_start` says it (12),
    and the last `message_delta` carries the credits."""

    async def test(up: Upstreams) -> None:
        body = {
            "model": "gemini",
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": "Hello"}],
        }
        outcome = await messages_call_streamed(up.parts, body)
        try:
            frames = b"".join([frame async for frame in outcome.events.events()])
        finally:
            await outcome.events.close()
        events = [
            msgspec.json.decode(block.split(b"\ndata: ", 1)[1])
            for block in frames.split(b"\n\n")
            if block
        ]
        start = events[0]["message"]
        assert start["id"].startswith("msg_") and start["usage"]["input_tokens"] == 12
        (delta,) = [event for event in events if event["type"] == "message_delta"]
        assert delta["usage"]["input_tokens"] == 12 and delta["usage"]["credits"]

    _run(tmp_path, test)


def test_every_field_that_only_tunes_anthropic_is_dropped_and_named(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        tuning = {
            "context_management": {"edits": []},
            "cache_control": {"type": "ephemeral"},
            "service_tier": "auto",
            "top_k": 5,
            "diagnostics": {"previous_message_id": None},
            "fallback_credit_token": "fct_1",
            "user_profile_id": "up_1",
        }
        hello = [{"role": "user", "content": "Hi"}]
        body = {"model": "openai", "max_tokens": 50, "messages": hello}
        outcome = await messages_call(up.parts, {**body, **tuning})
        assert sorted(outcome.dropped) == sorted(tuning)
        assert not set(tuning) & set(up.sent("openai"))
        native = await messages_call(up.parts, {**body, **tuning, "model": "anthropic"})
        assert native.dropped == () and up.anthropic.requests[-1].json == {
            **body,
            **tuning,
            "model": "claude-up",
        }

    _run(tmp_path, test)


def test_fallbacks_to_other_models_are_refused_on_every_upstream(tmp_path: Path) -> None:
    async def test(up: Upstreams) -> None:
        for model in ("anthropic", "openai"):
            body = {
                "model": model,
                "max_tokens": 50,
                "messages": [{"role": "user", "content": "Hi"}],
                "fallbacks": [{"model": "claude-opus-4-1"}],
            }
            with pytest.raises(InvalidRequest) as refused:
                await messages_call(up.parts, body)
            assert [d.field for d in refused.value.details] == ["fallbacks"]
        assert up.anthropic.requests == [] and up.openai.requests == []

    _run(tmp_path, test)
