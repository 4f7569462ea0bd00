"""Codex CLI (`@openai/codex`, pinned in tests/clients/package.json and installed there by
.ci/run) against the embedded default through the Responses API: a custom provider in a
scratch `config.toml` (`wire_api = "responses"`, checked by `--strict-config`), `codex exec`
gives the simulator's answer and exits 0. Offline: a scratch CODEX_HOME and HOME, analytics
off, no update check, no retries. Codex offers `web_search` and namespaced tools by default:
they are dropped and named, and the run still works. Without the client the tests skip, but
under CI=true they fail."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from providers.simulator.generator import _VOCAB
from tests.support.gateway_process import ROOT, GatewayProcess, start_gateway
from tests.support.waiting import wait_until

CODEX = ROOT / "tests" / "clients" / "node_modules" / ".bin" / "codex"
CONFIG = """
model = "auto"
model_provider = "gateway"
check_for_update_on_startup = false

[model_providers.gateway]
name = "Gateway"
base_url = "{base_url}"
env_key = "GATEWAY_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
"""


def codex_binary() -> Path:
    if CODEX.exists():
        return CODEX
    message = f"Codex CLI is not installed ({CODEX}); .ci/run installs it (npm, tests/clients)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config = (ROOT / "config" / "gateway.toml").read_text()
    process = start_gateway(tmp_path_factory.mktemp("gw-codex"), config)
    yield process
    process.stop()


def run_codex(
    gateway: GatewayProcess, home: Path, prompt: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    """`codex exec PROMPT` in a scratch folder; the process and its last message."""
    binary = codex_binary()
    codex_home = home / "codex-home"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(CONFIG.format(base_url=gateway.base_url))
    work = home / "work"
    work.mkdir()
    last = home / "last-message.txt"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "GATEWAY_API_KEY": gateway.api_key or "",
        "NO_COLOR": "1",
    }
    process = subprocess.run(
        [
            str(binary),
            "exec",
            "--strict-config",
            "--skip-git-repo-check",
            "--ephemeral",
            "-o",
            str(last),
            prompt,
        ],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return process, last.read_text() if last.exists() else ""


def test_codex_exec_gets_the_simulators_answer(gateway: GatewayProcess, tmp_path: Path) -> None:
    process, answer = run_codex(gateway, tmp_path, "Say hello")
    assert process.returncode == 0, process.stderr[-3000:]
    words = re.findall(r"[a-z]+", answer.lower())
    assert words and set(words) <= set(_VOCAB), answer  # every word is the simulator's
    assert answer.strip() in process.stdout
    calls = wait_until(  # a line is written once its answer went out
        lambda: [
            r
            for r in gateway.log_records()
            if r.get("event") == "request" and r.get("route") == "/v1/responses"
        ],
        what="the log lines of Codex's calls",
    )
    assert all(r["status"] == 200 and r["dialect"] == "responses" for r in calls)
    assert all("web_search" in (r["dropped_tools"] or "") for r in calls)
    database = Path(gateway.env["GATEWAY_DATA_DIR"]) / "gateway.db"
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        (kept,) = db.execute("SELECT count(*) FROM responses").fetchone()
    assert kept == 0  # Codex sends `store: false` and its whole history: the gateway keeps none
