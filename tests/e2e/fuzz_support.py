"""Running schemathesis' CLI against a gateway and reading what it did from its NDJSON report.

The report has, per test case, the request and response and each check's verdict; the summary
counts what docs/reliability.md reports: requests, server errors and failures per check (a
`negative_data_rejection` failure is an invalid request the gateway accepted).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CHECKS", "FuzzRun", "FuzzSummary", "run_schemathesis"]

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
)


@dataclass(frozen=True)
class FuzzRun:
    """One schemathesis run: which operations, with which Authorization, how hard."""

    name: str
    include_path_regex: str
    authorization: str
    max_examples: int
    phases: str = "examples,coverage,fuzzing,stateful"
    parameters: dict[str, str] = field(default_factory=dict)
    """Fixed parameter values (`path.task_id`: ...), e.g. another tenant's ids."""


@dataclass
class FuzzSummary:
    name: str
    exit_code: int
    output: str
    seconds: float
    requests: int = 0
    cases: int = 0
    negative_cases: int = 0
    server_errors: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    """Per check: test cases it failed."""
    errors: list[str] = field(default_factory=list)
    """What schemathesis could not test (an error, not a verdict)."""
    answers: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    """(method, path template, status) -> responses."""
    failed_cases: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return {
            "run": self.name,
            "seconds": self.seconds,
            "requests": self.requests,
            "test_cases": self.cases,
            "negative_cases": self.negative_cases,
            "server_errors": self.server_errors,
            **{check: self.failures[check] for check in CHECKS},
        }


def run_schemathesis(
    schema_url: str, run: FuzzRun, *, seed: int, report_dir: Path, timeout: float
) -> FuzzSummary:
    report_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "schemathesis.cli"]
    if run.parameters:
        config = report_dir / "schemathesis.toml"
        lines = ["[parameters]", *(f'"{k}" = "{v}"' for k, v in run.parameters.items())]
        config.write_text("\n".join(lines) + "\n")
        command += ["--config-file", str(config)]
    command += [
        "run",
        schema_url,
        "--checks",
        ",".join(CHECKS),
        "--include-path-regex",
        run.include_path_regex,
        "--header",
        f"Authorization: {run.authorization}",
        "--seed",
        str(seed),
        "--max-examples",
        str(run.max_examples),
        "--phases",
        run.phases,
        "--workers",
        "1",
        "--no-shrink",
        "--report",
        "ndjson",
        "--report-ndjson-path",
        str(report_dir / "events.ndjson"),
    ]
    started = time.monotonic()
    done = subprocess.run(  # in the report folder: schemathesis keeps a cache in its cwd
        command, capture_output=True, text=True, timeout=timeout, check=False, cwd=report_dir
    )
    summary = FuzzSummary(
        name=run.name,
        exit_code=done.returncode,
        output=done.stdout,
        seconds=round(time.monotonic() - started, 1),
    )
    _read_events(report_dir / "events.ndjson", summary)
    return summary


def _read_events(path: Path, summary: FuzzSummary) -> None:
    if not path.exists():
        summary.errors.append("no NDJSON report was written")
        return
    for line in path.read_text().splitlines():
        event = json.loads(line)
        (kind, body), *_ = event.items()
        if kind in ("NonFatalError", "FatalError"):
            summary.errors.append(json.dumps(body)[:2000])
        elif kind == "ScenarioFinished":
            _read_scenario(body["recorder"], summary)


def _read_scenario(recorder: dict[str, Any], summary: FuzzSummary) -> None:
    cases = recorder.get("cases", {})
    for case_id, verdicts in recorder.get("checks", {}).items():
        failed = [v["name"] for v in verdicts if v["status"] == "failure"]
        summary.failures.update(failed)
        if failed:
            value = cases.get(case_id, {}).get("value", {})
            summary.failed_cases.append(
                f"{value.get('method')} {value.get('path')} ({case_id}): {', '.join(failed)}"
            )
    for case in cases.values():
        summary.cases += 1
        if case["value"].get("meta", {}).get("generation", {}).get("mode") == "negative":
            summary.negative_cases += 1
    for case_id, interaction in recorder.get("interactions", {}).items():
        response = interaction.get("response")
        if response is None:
            continue
        summary.requests += 1
        status = int(response["status_code"])
        if status >= 500:
            summary.server_errors += 1
        value = cases.get(case_id, {}).get("value", {})
        method = value.get("method") or interaction["request"]["method"]
        summary.answers[method, value.get("path", "?"), status] += 1
