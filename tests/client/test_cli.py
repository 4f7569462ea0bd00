"""`gateway tasks ...` as a user runs it: a real subprocess against a real gateway."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from tests.client.support import media_gateway
from tests.support import preloaded
from tests.support.gateway_process import GatewayProcess

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from media_gateway(tmp_path_factory.mktemp("tasks-cli"))


def _env(gateway: GatewayProcess, tmp_path: Path, key: str | None) -> dict[str, str]:
    """The caller's environment: base URL and key, and a store and routing file that do not
    exist (the tasks commands must not need either)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GATEWAY_")}
    env |= {
        "GATEWAY_BASE_URL": gateway.base_url,
        "GATEWAY_CONFIG": str(tmp_path / "no-such-routing-file.toml"),
        "GATEWAY_STORE_URL": "redis://127.0.0.1:9/0",
        "GATEWAY_DATA_DIR": str(tmp_path / "no-data"),
    }
    if key is not None:
        env["GATEWAY_API_KEY"] = key
    return env


def tasks(
    gateway: GatewayProcess, tmp_path: Path, *args: str, key: str | None = ""
) -> subprocess.CompletedProcess[str]:
    """`gateway tasks ARGS`, forked as tests/support/preloaded.py does (key "" = the gateway's
    default key)."""
    env = _env(gateway, tmp_path, gateway.api_key if key == "" else key)
    return preloaded.run(["tasks", *args], env=env, cwd=tmp_path, timeout=90)


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("gateway: ")
    return lines[0]


def test_create_image_wait_out_saves_the_files(gateway: GatewayProcess, tmp_path: Path) -> None:
    out = tmp_path / "images"
    result = tasks(
        gateway,
        tmp_path,
        "create",
        "image",
        "--prompt",
        "a lighthouse [[sim:task_ms=2000]]",
        "--aspect-ratio",
        "16:9",
        "--n",
        "2",
        "--wait",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    paths = [Path(line) for line in result.stdout.splitlines()]
    assert len(paths) == 2 and all(p.parent == out and p.suffix == ".png" for p in paths)
    for path in paths:
        with Image.open(path) as picture:
            assert picture.format == "PNG" and picture.size == (512, 288)
    assert sorted(out.iterdir()) == sorted(paths)
    # Not a terminal: plain progress lines on stderr, one per change, no carriage returns.
    assert "\r" not in result.stderr
    progress = result.stderr.splitlines()
    assert len(progress) >= 2 and progress[-1].endswith("succeeded 100% succeeded"), progress
    assert all(line.startswith(paths[0].name.split("-")[0]) for line in progress)


def test_create_music_then_wait_get_list_download(gateway: GatewayProcess, tmp_path: Path) -> None:
    created = tasks(
        gateway,
        tmp_path,
        "create",
        "music",
        "--prompt",
        "calm",
        "--model",
        "beta-music-2.6",
        "--instrumental",
        "--metadata",
        "order=7",
    )
    assert created.returncode == 0, created.stderr
    task_id = created.stdout.strip()
    assert task_id.startswith("task_") and created.stdout.count("\n") == 1

    waited = tasks(gateway, tmp_path, "wait", task_id)
    assert waited.returncode == 0, waited.stderr
    task = json.loads(waited.stdout)
    assert task["task_id"] == task_id and task["status"] == "succeeded"
    assert task["metadata"] == {"order": "7"} and task["input"]["instrumental"] is True
    assert task["billing"]["charged_credits"] == "50.0000"

    got = tasks(gateway, tmp_path, "get", task_id)
    assert got.returncode == 0 and json.loads(got.stdout)["status"] == "succeeded"

    listed = tasks(gateway, tmp_path, "list", "--limit", "1")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split("\t")[:3] == [task_id, "succeeded", "text_to_music"]
    as_json = tasks(gateway, tmp_path, "list", "--all", "--json", "--capability", "text_to_music")
    assert task_id in [json.loads(line)["task_id"] for line in as_json.stdout.splitlines()]

    downloaded = tasks(gateway, tmp_path, "download", task_id, "--out", "clips")
    assert downloaded.returncode == 0, downloaded.stderr
    (path,) = downloaded.stdout.splitlines()
    assert path == f"clips/{task_id}-1.wav"
    with wave.open(str(tmp_path / path), "rb") as audio:
        assert audio.getnframes() > 0


def test_cancel_then_wait_reports_the_canceled_task(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    created = tasks(gateway, tmp_path, "create", "music", "--prompt", "forever [[sim:stall]]")
    task_id = created.stdout.strip()
    canceled = tasks(gateway, tmp_path, "cancel", task_id)
    assert canceled.returncode == 0, canceled.stderr
    assert json.loads(canceled.stdout)["task_id"] == task_id
    waited = tasks(gateway, tmp_path, "wait", task_id, "--out", "never")
    assert waited.returncode == 1
    assert waited.stdout == ""
    assert waited.stderr.splitlines()[-1] == f"gateway: task {task_id} canceled"
    assert not (tmp_path / "never").exists()


def test_a_bad_key_is_one_line_and_exit_1(gateway: GatewayProcess, tmp_path: Path) -> None:
    result = tasks(gateway, tmp_path, "create", "image", "--prompt", "x", key="gw-wrong")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "invalid_api_key" in _one_error_line(result)


def test_usage_mistakes_exit_2_without_a_traceback(gateway: GatewayProcess, tmp_path: Path) -> None:
    missing = tasks(gateway, tmp_path, "create", "image")
    assert missing.returncode == 2 and "--prompt" in missing.stderr
    too_many = tasks(gateway, tmp_path, "create", "image", "--prompt", "x", "--n", "9")
    assert too_many.returncode == 2 and "--n" in too_many.stderr
    no_key = tasks(gateway, tmp_path, "get", "task_x", key=None)
    assert no_key.returncode == 2 and "GATEWAY_API_KEY" in _one_error_line(no_key)
    no_file = tasks(gateway, tmp_path, "create", "image", "--prompt", "x", "--image", "nope.png")
    assert no_file.returncode == 2 and "nope.png" in _one_error_line(no_file)
    refused = tasks(
        gateway,
        tmp_path,
        "create",
        "image",
        "--prompt",
        "x",
        "--quality",
        "hd",
        "--aspect-ratio",
        "auto",
    )
    assert refused.returncode == 2 and "validation_error" in _one_error_line(refused)
    for result in (missing, too_many, no_key, no_file, refused):
        assert "Traceback" not in result.stderr and result.stdout == ""


def test_an_unknown_task_and_an_absent_gateway_exit_1(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    unknown = tasks(gateway, tmp_path, "get", "task_doesnotexist")
    assert unknown.returncode == 1 and "not_found" in _one_error_line(unknown)
    away = tasks(
        gateway, tmp_path, "get", "task_x", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k"
    )
    assert away.returncode == 1 and "127.0.0.1:9" in _one_error_line(away)


def test_image_to_image_from_a_local_file(gateway: GatewayProcess, tmp_path: Path) -> None:
    source = tmp_path / "red.png"
    Image.new("RGB", (30, 20), (255, 0, 0)).save(source)
    result = tasks(
        gateway, tmp_path, "create", "image", "--prompt", "glow", "--image", str(source), "--wait"
    )
    assert result.returncode == 0, result.stderr
    task = json.loads(result.stdout)
    assert task["capability"] == "image_to_image" and task["status"] == "succeeded"
    assert task["input"]["image"]["artifact_id"].startswith("art_")


def test_a_terminal_gets_a_progress_bar(gateway: GatewayProcess, tmp_path: Path) -> None:
    # Long enough that `tasks wait` polls it running: a loaded 2-core machine took over 3 s from
    # the create to the first poll (two CLI starts), and a bar drawn once proves no redraw.
    created = tasks(gateway, tmp_path, "create", "image", "--prompt", "p [[sim:task_ms=12000]]")
    task_id = created.stdout.strip()
    leader, follower = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "gateway.app.cli", "tasks", "wait", task_id],
            env=_env(gateway, tmp_path, gateway.api_key),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
            timeout=90,
        )
        os.close(follower)
        follower = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: everything was read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert result.returncode == 0
    assert json.loads(result.stdout)["status"] == "succeeded"
    screen = drawn.decode()
    assert screen.count(f"\r{task_id} [") >= 2, screen  # redrawn in place
    assert "#" * 24 + "] 100% succeeded" in screen and screen.endswith("\n")
