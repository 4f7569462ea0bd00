"""Claude Code itself (`tests/agents` pins the release) against running gateways, as its users
run it: `ANTHROPIC_BASE_URL` at the gateway, a key, `claude -p` with a prompt that makes the
model read a file. The session (tests/support/claude_code_session.py) is two turns: the model
calls Read, Claude Code runs it and sends the result back, the model answers. On the embedded
default a simulator directive asks for the call; on the Anthropic, OpenAI, Gemini and Bedrock
fakes the scripted answers do. Each run must exit 0 with the expected answer, and every request
it made must be answered 2xx in the gateway's log.

The requests Claude Code sends in that session, recorded (tests/fakes/recorded/
claude_code_requests.json), are replayed through the Anthropic passthrough: they reach the
upstream byte for byte, with their beta headers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes import bedrock_upstream as bedrock
from tests.fakes import gemini_upstream as gemini
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.openai_upstream import StreamReply as OpenAIStream
from tests.fakes.recorded import load
from tests.support.claude_code import ClaudeRun, claude_code, run_claude
from tests.support.claude_code_session import (
    ANSWER,
    NOTE,
    PROMPT,
    anthropic_script,
    note_path,
    prepare,
)
from tests.support.gateway_process import ROOT, GatewayProcess, start_gateway
from tests.support.waiting import wait_until

CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.claude]
kind = "anthropic"
base_url = "{anthropic}"
api_key = "sk-ant-upstream-secret"
timeout_seconds = 10
stream_read_timeout_seconds = 10

[providers.openai]
kind = "openai"
base_url = "{openai}"
api_key = "sk-upstream"
timeout_seconds = 10
stream_read_timeout_seconds = 10

[providers.gemini]
kind = "gemini"
base_url = "{gemini}"
api_key = "g-upstream-secret"
timeout_seconds = 10
stream_read_timeout_seconds = 10

[providers.bedrock]
kind = "bedrock"
region = "us-east-1"
base_url = "{bedrock}"
timeout_seconds = 10
stream_read_timeout_seconds = 10

[[models]]
id = "claude-sonnet-4-5"
provider = "claude"
upstream_model = "claude-sonnet-4-5"
capability = "chat"
markup = 1000
max_output_tokens = 64000
pricing = {{ input_usd_per_mtok = 3, cached_input_usd_per_mtok = 0.3, \
cache_write_usd_per_mtok = 3.75, output_usd_per_mtok = 15 }}

[[models]]
id = "claude-sonnet-8k"
provider = "claude"
upstream_model = "claude-sonnet-4-5"
capability = "chat"
markup = 1000
max_output_tokens = 8192
pricing = {{ input_usd_per_mtok = 3, output_usd_per_mtok = 15 }}

[[models]]
id = "claude-chat"
provider = "claude"
upstream_model = "claude-chat"
capability = "chat"
markup = 1000
max_output_tokens = 64000
pricing = {{ input_usd_per_mtok = 3, output_usd_per_mtok = 15 }}

[[models]]
id = "gpt-chat"
provider = "openai"
upstream_model = "gpt-4.1"
capability = "chat"
markup = 1000
max_output_tokens = 32768
pricing = {{ input_usd_per_mtok = 2, output_usd_per_mtok = 8 }}

[[models]]
id = "gemini-chat"
provider = "gemini"
upstream_model = "gemini-2.5-pro"
capability = "chat"
markup = 1000
max_output_tokens = 65536
pricing = {{ input_usd_per_mtok = 1.25, output_usd_per_mtok = 10 }}

[[models]]
id = "bedrock-chat"
provider = "bedrock"
upstream_model = "amazon.nova-pro-v1:0"
capability = "chat"
markup = 1000
max_output_tokens = 10000
pricing = {{ input_usd_per_mtok = 0.8, output_usd_per_mtok = 3.2 }}

[routing.auto]
chat = ["claude-sonnet-4-5"]

[tenants.default]
"""


AWS_KEY, AWS_SECRET = "AKIDCLAUDECODE01", "claude-code-throwaway-secret-for-the-fake"


@dataclass(frozen=True)
class Upstreams:
    anthropic: FakeAnthropic
    openai: FakeOpenAI
    gemini: FakeGemini
    bedrock: FakeBedrock


@pytest.fixture(scope="module")
def upstreams() -> Iterator[Upstreams]:
    fakes = Upstreams(
        FakeAnthropic(check_thinking=True),
        FakeOpenAI(),
        FakeGemini(),
        FakeBedrock(credentials=(AWS_KEY, AWS_SECRET)),
    )
    stops = [
        fake.start_in_thread()[1]
        for fake in (fakes.anthropic, fakes.openai, fakes.gemini, fakes.bedrock)
    ]
    yield fakes
    for stop in stops:
        stop()


@pytest.fixture(scope="module")
def gateway(
    upstreams: Upstreams, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    config = CONFIG.format(
        anthropic=upstreams.anthropic.base_url,
        openai=upstreams.openai.base_url,
        gemini=upstreams.gemini.base_url,
        bedrock=upstreams.bedrock.base_url,
    )
    workdir = tmp_path_factory.mktemp("gw-claude-code")
    aws = {
        "AWS_ACCESS_KEY_ID": AWS_KEY,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_SHARED_CREDENTIALS_FILE": str(workdir / "no-aws-credentials"),
        "AWS_CONFIG_FILE": str(workdir / "no-aws-config"),
    }
    process = start_gateway(workdir, config, extra_env=aws)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def embedded_default(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway of the routing file `gateway serve` ships with (simulator providers)."""
    config = (ROOT / "config" / "gateway.toml").read_text()
    process = start_gateway(tmp_path_factory.mktemp("gw-embedded"), config)
    yield process
    process.stop()


@pytest.fixture
def claude() -> Path:
    return claude_code()


def _root(gateway: GatewayProcess) -> str:
    return gateway.base_url.removesuffix("/v1")


def _requests(gateway: GatewayProcess) -> list[dict[str, Any]]:
    """The gateway's log lines of requests, the health checks of its start left out."""
    return [
        line
        for line in gateway.log_records()
        if line.get("event") == "request" and line.get("route") != "/v1/health"
    ]


def _run(
    claude: Path,
    gateway: GatewayProcess,
    tmp_path: Path,
    *,
    prompt: str,
    model: str,
    small_model: str,
    key_variable: str = "ANTHROPIC_API_KEY",
) -> tuple[ClaudeRun, list[dict[str, Any]]]:
    """One session, and the log lines of the requests it made; checks that it ended as the
    session does (exit 0, Read of the note run and its content sent back, two turns) and that
    every request it made was answered 2xx."""
    assert gateway.api_key
    scratch = prepare(tmp_path)
    before = len(_requests(gateway))
    run = run_claude(
        claude,
        scratch,
        base_url=_root(gateway),
        key=gateway.api_key,
        prompt=prompt,
        model=model,
        small_model=small_model,
        max_turns=4,
        allowed_tools=["Read"],
        key_variable=key_variable,
    )
    assert run.returncode == 0, run.describe()
    assert run.result["subtype"] == "success" and not run.result["is_error"], run.describe()
    (use,) = run.tool_uses()
    assert (use["name"], use["input"]) == ("Read", {"file_path": note_path(scratch)})
    (result,) = run.tool_results()
    assert NOTE.strip() in json.dumps(result["content"]), result
    assert run.result["num_turns"] == 2, run.describe()
    # One log line per answered call: Claude Code's assistant messages carry the call's id.
    calls = {
        line["message"]["id"]
        for line in run.messages
        if line.get("type") == "assistant" and line["message"].get("model") != "<synthetic>"
    }
    lines = wait_until(
        lambda: _requests(gateway)[before:],
        lambda lines: len(lines) >= len(calls),
        timeout=10,
        what="the log lines of Claude Code's requests",
    )
    assert all(200 <= line["status"] < 300 for line in lines), lines
    assert [line["route"] for line in lines].count("/v1/messages") == len(calls) == 2, lines
    return run, lines


def test_claude_code_reads_a_file_on_the_embedded_default(
    claude: Path, embedded_default: GatewayProcess, tmp_path: Path
) -> None:
    """`--model auto` on the routing file the gateway ships with: the simulator calls Read as
    the directive asks, then answers the tool result in text."""
    note = str(tmp_path / "work" / "note.txt")
    directive = f'[[sim:tool_call=Read]] [[sim:tool_input={{"file_path": "{note}"}}]]'
    run, lines = _run(
        claude,
        embedded_default,
        tmp_path,
        prompt=f"{PROMPT} {directive}",
        model="auto",
        small_model="sim-chat-1",
    )
    assert run.result["result"].endswith(".") and len(run.result["result"].split()) >= 8
    assert {line["model"] for line in lines} == {"sim-chat-1"}


def test_claude_code_on_the_anthropic_passthrough(
    claude: Path, gateway: GatewayProcess, upstreams: Upstreams, tmp_path: Path
) -> None:
    fake = upstreams.anthropic
    fake.requests.clear()
    fake.enqueue(*anthropic_script(prepare(tmp_path)))
    run, _ = _run(
        claude,
        gateway,
        tmp_path,
        prompt=PROMPT,
        model="claude-sonnet-4-5",
        small_model="claude-sonnet-4-5",
    )
    assert run.result["result"] == ANSWER
    first, second = fake.requests
    assert first.headers["anthropic-beta"] == second.headers["anthropic-beta"]
    assert "claude-code-20250219" in first.headers["anthropic-beta"].split(",")
    assert first.headers["x-api-key"] == "sk-ant-upstream-secret"
    assert second.json["messages"][-1]["content"][0]["type"] == "tool_result"


def test_claude_code_translated_to_openai(
    claude: Path, gateway: GatewayProcess, upstreams: Upstreams, tmp_path: Path
) -> None:
    """With `ANTHROPIC_AUTH_TOKEN` (a bearer) on a model of an OpenAI upstream."""
    fake = upstreams.openai
    fake.requests.clear()
    scratch = prepare(tmp_path)
    arguments = json.dumps({"file_path": note_path(scratch)})
    call = {"index": 0, "id": "call_1", "type": "function"}
    fake.enqueue(
        OpenAIStream(
            chunks=[
                _chunk({"role": "assistant", "content": None}),
                _chunk(
                    {"tool_calls": [{**call, "function": {"name": "Read", "arguments": arguments}}]}
                ),
                _chunk({}, "tool_calls"),
                _usage(900, 20),
            ]
        ),
        OpenAIStream(
            chunks=[
                _chunk({"role": "assistant", "content": ""}),
                _chunk({"content": ANSWER}),
                _chunk({}, "stop"),
                _usage(950, 8),
            ]
        ),
    )
    run, _ = _run(
        claude,
        gateway,
        tmp_path,
        prompt=PROMPT,
        model="gpt-chat",
        small_model="gpt-chat",
        key_variable="ANTHROPIC_AUTH_TOKEN",
    )
    assert run.result["result"] == ANSWER
    first, second = (request.json for request in fake.requests)
    assert first["model"] == "gpt-4.1" and "Read" in {t["function"]["name"] for t in first["tools"]}
    assert second["messages"][-1]["role"] == "tool"


def test_claude_code_translated_to_gemini(
    claude: Path, gateway: GatewayProcess, upstreams: Upstreams, tmp_path: Path
) -> None:
    fake = upstreams.gemini
    fake.requests.clear()
    scratch = prepare(tmp_path)
    read = gemini.function_call("Read", {"file_path": note_path(scratch)})
    fake.enqueue(
        gemini.StreamReply(
            events=[gemini.response(gemini.candidate(read), usage_metadata=gemini.usage(900, 20))]
        ),
        gemini.StreamReply(events=gemini.events_for(ANSWER)),
    )
    run, _ = _run(
        claude,
        gateway,
        tmp_path,
        prompt=PROMPT,
        model="gemini-chat",
        small_model="gemini-chat",
    )
    assert run.result["result"] == ANSWER
    first, second = fake.requests
    assert "gemini-2.5-pro:streamGenerateContent" in first.path
    parts = second.json["contents"][-1]["parts"]
    assert any("functionResponse" in part for part in parts)


def test_claude_code_translated_to_bedrock(
    claude: Path, gateway: GatewayProcess, upstreams: Upstreams, tmp_path: Path
) -> None:
    """On a model of Bedrock's Converse API (the events in the shape recorded from it,
    tests/fakes/recorded/bedrock_tool_stream.json)."""
    fake = upstreams.bedrock
    fake.requests.clear()
    scratch = prepare(tmp_path)
    arguments = json.dumps({"file_path": note_path(scratch)})
    read: list[bedrock.Event] = [
        ("messageStart", {"role": "assistant"}),
        (
            "contentBlockStart",
            {"contentBlockIndex": 0, "start": {"toolUse": {"name": "Read", "toolUseId": "t1"}}},
        ),
        (
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"toolUse": {"input": arguments}}},
        ),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("messageStop", {"stopReason": "tool_use"}),
        ("metadata", {"usage": bedrock.usage(900, 20), "metrics": {"latencyMs": 90}}),
    ]
    fake.enqueue(
        bedrock.StreamReply(events=read),
        bedrock.StreamReply(events=bedrock.events_for(ANSWER)),
    )
    run, _ = _run(
        claude,
        gateway,
        tmp_path,
        prompt=PROMPT,
        model="bedrock-chat",
        small_model="bedrock-chat",
    )
    assert run.result["result"] == ANSWER
    first, second = fake.requests
    assert "converse-stream" in first.path
    results = [b for turn in second.json["messages"] for b in turn["content"] if "toolResult" in b]
    assert results and results[-1]["toolResult"]["toolUseId"] == "t1"


def test_claude_codes_start_up_probe_is_answered(gateway: GatewayProcess) -> None:
    """Claude Code sends `HEAD /api/hello` to its base URL when it starts (the runs here turn
    its non-essential traffic off, the probe with it): answered 200 without a key, as
    Anthropic's API answers it."""
    before = len(_requests(gateway))
    with httpx.Client(base_url=_root(gateway), timeout=10) as http:
        assert http.head("/api/hello").status_code == 200
        assert http.get("/api/hello").status_code == 200
    lines = wait_until(
        lambda: _requests(gateway)[before:],
        lambda lines: len(lines) >= 2,
        timeout=10,
        what="the log lines of the probes",
    )
    assert [(line["method"], line["route"], line["status"]) for line in lines] == [
        ("HEAD", "/api/hello", 200),
        ("GET", "/api/hello", 200),
    ]


def test_recorded_claude_code_requests_reach_the_upstream_byte_for_byte(
    gateway: GatewayProcess, upstreams: Upstreams
) -> None:
    """What Claude Code sent (recorded), replayed through the passthrough: each body reaches
    the Anthropic upstream as the bytes Claude Code sent, with its version and beta headers."""
    fake = upstreams.anthropic
    recorded = load("claude_code_requests")
    assert gateway.api_key
    with httpx.Client(base_url=_root(gateway), timeout=30) as http:
        for session in recorded["sessions"]:
            for request in session["requests"]:
                fake.requests.clear()
                headers = {**request["headers"], "x-api-key": gateway.api_key}
                body = request["body"].encode()
                for turn in json.loads(body)["messages"]:  # the fake signed its thinking
                    if turn["role"] == "assistant":
                        fake.issue(turn["content"])
                answer = http.post(request["path"], content=body, headers=headers)
                assert answer.status_code == 200, answer.text
                (sent,) = fake.requests
                assert sent.body == body
                for name in ("anthropic-beta", "anthropic-version"):
                    assert sent.headers[name] == request["headers"][name]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [choice],
    }


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    return {**_chunk({}), "choices": [], "usage": usage}


def test_a_lowered_max_tokens_keeps_claude_codes_thinking_budget_below_it(
    gateway: GatewayProcess, upstreams: Upstreams
) -> None:
    """Claude Code asks a model it knows for `max_tokens: 32000` with thinking of
    `budget_tokens: 31999` (recorded). On a route whose limit is lower the gateway lowers
    `max_tokens`; Anthropic refuses a budget that is not below it, so the budget comes down too."""
    fake = upstreams.anthropic
    fake.requests.clear()
    (session,) = [
        s for s in load("claude_code_requests")["sessions"] if s["model"] == "claude-sonnet-4-5"
    ]
    request = session["requests"][0]
    body = json.loads(request["body"])
    assert (body["max_tokens"], body["thinking"]["budget_tokens"]) == (32000, 31999)
    assert gateway.api_key
    with httpx.Client(base_url=_root(gateway), timeout=30) as http:
        answer = http.post(
            request["path"],
            json={**body, "model": "claude-sonnet-8k"},
            headers={**request["headers"], "x-api-key": gateway.api_key},
        )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-gateway-max-tokens"] == "8192"
    (sent,) = fake.requests
    assert sent.json["max_tokens"] == 8192
    assert 1024 <= sent.json["thinking"]["budget_tokens"] < 8192
