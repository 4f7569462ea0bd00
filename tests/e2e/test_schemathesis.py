"""API fuzzing with schemathesis against a real `gateway serve`, from its own /openapi.json.

Every operation is fuzzed with a valid key (the /admin/v1 ones with the admin token), with an
invalid key, and with another tenant's key aimed at the first tenant's task and artifact. The
checks: no server error, every status documented, every body as documented, every invalid
request refused. With an invalid key nothing but the health check may succeed; with another
tenant's key the first tenant's things stay out of reach.

CI runs the short form (3 examples per operation, seed 42). The full form, whose figures
docs/reliability.md reports (seed 42, 50 examples per operation):

    GATEWAY_FUZZ_FULL=1 .venv/bin/python -m pytest tests/e2e/test_schemathesis.py -s -n 0

`GATEWAY_FUZZ_REPORT=path.json` also writes the figures there.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.admin.token import new_admin_token
from tests.e2e.fuzz_support import CHECKS, FuzzRun, FuzzSummary, run_schemathesis
from tests.support.gateway_process import GatewayProcess, start_gateway

FULL = os.environ.get("GATEWAY_FUZZ_FULL", "") not in ("", "0")
SEED = 42
EXAMPLES = 50 if FULL else 3
RUN_TIMEOUT = 3600.0 if FULL else 120.0

CONFIG = """
[gateway]
starting_grant_credits = 1000000
hold_seconds = 60

[limits]
requests_per_minute = 1000000
tokens_per_minute = 1000000000

[providers.sim]
kind = "simulator"
task_seconds = 0.05

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
max_output_tokens = 4096
pricing = { input_usd_per_mtok = 0.5, output_usd_per_mtok = 1.5 }

[[models]]
id = "sim-embed-1"
provider = "sim"
capability = "embeddings"
pricing = { input_usd_per_mtok = 0.1 }

[[models]]
id = "image-model-2"
provider = "sim"
capabilities = ["text_to_image", "image_to_image"]
release_label = "Preview"
pricing = { credits_per_image = { standard = 50, hd = 300, "image_to_image.standard" = 60, \
"image_to_image.hd" = 320 } }

[[models]]
id = "alpha-5.5"
provider = "sim"
capabilities = ["text_to_music", "reference_audio_to_music"]
options_namespace = "alpha"
release_label = "Preview"
pricing = { credits_per_task = 80 }

[routing.auto]
chat = ["sim-chat-1"]
embeddings = ["sim-embed-1"]
text_to_image = ["image-model-2"]
image_to_image = ["image-model-2"]
text_to_music = ["alpha-5.5"]
reference_audio_to_music = ["alpha-5.5"]

[tenants.default]
[tenants.other]
"""

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
V1 = "^/v1/"
ADMIN = "^/admin/v1/"
ANY = "^/(v1|admin/v1)/"


class Fuzzed:
    def __init__(self, gateway: GatewayProcess, admin_token: str, other_key: str) -> None:
        self.gateway = gateway
        self.admin_token = admin_token
        self.other_key = other_key
        self.root = gateway.base_url.removesuffix("/v1")
        assert gateway.api_key
        self.key = gateway.api_key
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=self.root, headers=headers, timeout=30) as client:
            task = client.post("/v1/images/generations", json={"model": "auto", "prompt": "x"})
            upload = client.post("/v1/uploads", files={"file": ("a.png", PIXEL, "image/png")})
        assert task.status_code == 202, task.text
        assert upload.status_code == 201, upload.text
        self.task_id: str = task.json()["task_id"]
        self.artifact_id: str = upload.json()["artifact_id"]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    token = new_admin_token()
    gateway = start_gateway(
        tmp_path_factory.mktemp("fuzz"), CONFIG, extra_env={"GATEWAY_ADMIN_TOKEN": token}
    )
    try:
        other = gateway.new_key("other")
        gateway.grant("other", "1000000")
        yield Fuzzed(gateway, token, other)
    finally:
        gateway.stop()


def _runs(f: Fuzzed) -> list[FuzzRun]:
    light = "examples,fuzzing"
    return [
        FuzzRun("valid key", V1, f"Bearer {f.key}", EXAMPLES),
        FuzzRun(
            "another tenant's key",
            ANY,
            f"Bearer {f.other_key}",
            EXAMPLES,
            phases=light,
            parameters={"path.task_id": f.task_id, "path.artifact_id": f.artifact_id},
        ),
        FuzzRun("invalid key", ANY, "Bearer gw-" + "x" * 43, EXAMPLES, phases=light),
        # Last: its stateful phase follows links such as list keys -> revoke.
        FuzzRun("admin token", ADMIN, f"Bearer {f.admin_token}", EXAMPLES),
    ]


RUN_NAMES = ["valid key", "another tenant's key", "invalid key", "admin token"]
_results: dict[str, FuzzSummary] = {}


@pytest.mark.parametrize("name", RUN_NAMES)
def test_fuzzing_finds_nothing(fuzzed: Fuzzed, name: str, tmp_path: Path) -> None:
    (run,) = [r for r in _runs(fuzzed) if r.name == name]
    summary = run_schemathesis(
        f"{fuzzed.root}/openapi.json",
        run,
        seed=SEED,
        report_dir=tmp_path / "report",
        timeout=RUN_TIMEOUT,
    )
    _results[name] = summary
    _report()
    assert not summary.errors, "schemathesis could not test everything:\n" + "\n".join(
        summary.errors
    )
    assert summary.requests > 0, summary.output
    failed = "\n".join(summary.failed_cases[:40])
    assert not summary.failures, f"{dict(summary.failures)}\n{failed}\n\n{summary.output}"
    assert summary.exit_code == 0, summary.output
    succeeded = {  # OPTIONS answers the allowed methods to anyone, and nothing else
        (method, path)
        for (method, path, status), _ in summary.answers.items()
        if 200 <= status < 300 and method != "OPTIONS"
    }
    if name == "invalid key":
        assert succeeded <= {("GET", "/v1/health")}, succeeded
    if name == "another tenant's key":
        foreign = {
            ("GET", "/v1/tasks/{task_id}"),
            ("POST", "/v1/tasks/{task_id}/cancel"),
            ("GET", "/v1/artifacts/{artifact_id}"),
            ("GET", "/v1/artifacts/{artifact_id}/content"),
        }
        assert not succeeded & foreign, succeeded & foreign
        assert not {p for p in succeeded if p[1].startswith("/admin/")}, succeeded


def _report() -> None:
    """The figures so far, printed (`-s`) and written to GATEWAY_FUZZ_REPORT if set."""
    rows = [summary.row() for summary in _results.values()]
    total = {"run": "total"} | {
        key: sum(int(row[key]) for row in rows)
        for key in ("requests", "test_cases", "negative_cases", "server_errors", *CHECKS)
    }
    print(json.dumps({"full": FULL, "seed": SEED, "max_examples": EXAMPLES, "runs": rows}))
    print(json.dumps(total))
    path = os.environ.get("GATEWAY_FUZZ_REPORT")
    if path:
        Path(path).write_text(
            json.dumps(
                {"full": FULL, "seed": SEED, "max_examples": EXAMPLES, "runs": [*rows, total]},
                indent=2,
            )
        )
