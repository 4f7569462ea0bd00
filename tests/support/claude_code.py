"""Claude Code (`@anthropic-ai/claude-code` from npm) run as its users run it: `claude -p` with
`ANTHROPIC_BASE_URL` at a gateway and a key, in a scratch home and working directory.

The version is pinned in one place, `tests/agents/package.json` (with its lock file), and
installed by `npm ci --prefix tests/agents` (`.ci/run` does it). Without it the tests that need
it skip locally and fail on CI (`CI=true`), where a missing agent is a bug; an installed version
other than the pinned one fails everywhere (a stale install would test the wrong release).

A run is offline: the variables Claude Code documents turn off telemetry, error reports, the
auto-updater and its non-essential traffic, so the only requests it makes go to the gateway.
Nothing of the caller's environment reaches it but `PATH`: no real key, no user settings.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway_process import ROOT

__all__ = [
    "AGENTS_DIR",
    "OFFLINE_ENV",
    "ClaudeRun",
    "ClaudeScratch",
    "claude_code",
    "pinned_version",
    "run_claude",
]

AGENTS_DIR = ROOT / "tests" / "agents"
PACKAGE = "@anthropic-ai/claude-code"
BINARY = AGENTS_DIR / "node_modules" / ".bin" / "claude"

# Claude Code's documented switches for a run that talks to nothing but ANTHROPIC_BASE_URL.
OFFLINE_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def pinned_version() -> str:
    """The version of Claude Code `tests/agents/package.json` pins."""
    manifest = json.loads((AGENTS_DIR / "package.json").read_text())
    return str(manifest["dependencies"][PACKAGE])


def claude_code() -> Path:
    """The installed `claude` of the pinned version; skips locally and fails on CI when it is
    not installed, fails everywhere when another version is."""
    wanted = pinned_version()
    if not BINARY.exists():
        reason = (
            f"Claude Code {wanted} is not installed: run `npm ci --prefix tests/agents` "
            "(node and npm needed)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Claude Code is required on CI: {reason}")
        pytest.skip(reason)
    shown = subprocess.run(
        [str(BINARY), "--version"], capture_output=True, text=True, timeout=60, check=False
    ).stdout
    if not shown.startswith(wanted + " "):
        pytest.fail(
            f"tests/agents has Claude Code {shown.strip()!r}, the pin is {wanted}: "
            "run `npm ci --prefix tests/agents`"
        )
    return BINARY


@dataclass(frozen=True)
class ClaudeScratch:
    """A run's own folders: `home` (its HOME and config dir) and `work` (its working
    directory, where the files its tools may touch are)."""

    home: Path
    work: Path

    @classmethod
    def under(cls, root: Path) -> ClaudeScratch:
        scratch = cls(home=root / "home", work=root / "work")
        scratch.home.mkdir(parents=True, exist_ok=True)
        scratch.work.mkdir(parents=True, exist_ok=True)
        return scratch


@dataclass(frozen=True)
class ClaudeRun:
    """What `claude -p --output-format stream-json --verbose` printed: `messages` (every JSON
    line: the init, each assistant and user message, the result), `result` (the last one)."""

    returncode: int
    messages: list[dict[str, Any]]
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        results = [m for m in self.messages if m.get("type") == "result"]
        assert results, f"claude printed no result (exit {self.returncode}): {self.stderr}"
        return results[-1]

    def tool_uses(self) -> list[dict[str, Any]]:
        """The tool_use blocks of the assistant's messages, in order."""
        return self._blocks("assistant", "tool_use")

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks Claude Code sent back, in order."""
        return self._blocks("user", "tool_result")

    def _blocks(self, kind: str, block_type: str) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        for line in self.messages:
            content = (
                (line.get("message") or {}).get("content") if line.get("type") == kind else None
            )
            if isinstance(content, list):
                blocks += [
                    b for b in content if isinstance(b, dict) and b.get("type") == block_type
                ]
        return blocks

    def describe(self) -> str:
        """The exit status, the result, what the session said (its init line left out) and
        stderr, for an assertion's message."""
        results = [m.get("result") for m in self.messages if m.get("type") == "result"]
        said = [m for m in self.messages if m.get("subtype") != "init"]
        return f"exit {self.returncode}, result {results}\nstderr: {self.stderr}\nmessages: {said}"


def run_claude(
    binary: Path,
    scratch: ClaudeScratch,
    *,
    base_url: str,
    key: str,
    prompt: str,
    model: str,
    small_model: str,
    max_turns: int,
    allowed_tools: Sequence[str] = (),
    key_variable: str = "ANTHROPIC_API_KEY",
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> ClaudeRun:
    """`claude -p PROMPT --max-turns N --model MODEL` against the gateway at `base_url` (its
    root, without `/v1`) with `key` in `key_variable` (`ANTHROPIC_API_KEY`: the x-api-key
    header; `ANTHROPIC_AUTH_TOKEN`: a bearer); `small_model` for its side requests."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(scratch.home),
        "CLAUDE_CONFIG_DIR": str(scratch.home / ".claude"),
        "TMPDIR": str(scratch.home),
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": base_url,
        key_variable: key,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": small_model,
        "ANTHROPIC_SMALL_FAST_MODEL": small_model,
        **OFFLINE_ENV,
        **(extra_env or {}),
    }
    command = [
        str(binary),
        "-p",
        prompt,
        "--max-turns",
        str(max_turns),
        "--model",
        model,
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    if allowed_tools:
        command += ["--allowedTools", ",".join(allowed_tools)]
    done = subprocess.run(
        command,
        env=env,
        cwd=scratch.work,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    messages = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return ClaudeRun(done.returncode, messages, done.stderr)
