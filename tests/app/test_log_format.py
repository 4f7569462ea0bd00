"""One log format for every command: JSON lines, from the gateway's own loggers and from the
libraries that log through the standard `logging` module; `gateway worker` logs as `serve`
does, and a one-shot command keeps its log lines off the stdout that is its result."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from gateway.logging import configure_logging, get_logger
from tests.support.gateway_process import ROOT
from tests.support.waiting import wait_until


def test_standard_logging_records_are_json_lines_too() -> None:
    stream = io.BytesIO()
    configure_logging("info", stream=stream)
    try:
        get_logger("gateway.test").info("own_event", answer=42)
        logging.getLogger("aiohttp.client").warning("a library says %s", "hello")
        logging.getLogger("aiohttp.client").info("below the libraries' level")
    finally:
        configure_logging("info")  # back to stdout for whatever runs next in this process
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["own_event", "a library says hello"]
    assert lines[0]["answer"] == 42 and lines[0]["level"] == "info"
    assert lines[1]["logger"] == "aiohttp.client" and lines[1]["level"] == "warning"
    assert all("timestamp" in line for line in lines)


def test_the_worker_logs_json_like_serve(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "GATEWAY_DATA_DIR": str(tmp_path / "data"),
        "GATEWAY_CONFIG": str(ROOT / "config" / "gateway.toml"),
        "GATEWAY_ARTIFACTS_DIR": str(tmp_path / "artifacts"),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("GATEWAY_STORE_URL", None)
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "gateway.app.cli", "worker", "--concurrency", "2"],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.PIPE,
        )
    try:
        wait_until(lambda: '"config_loaded"' in log.read_text(), what="the worker's first log line")
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    banner, *lines = [line for line in log.read_text().splitlines() if line.strip()]
    assert banner.startswith("Worker ") and "2 at a time" in banner
    assert lines, "the worker logged nothing"
    for line in lines:
        event = json.loads(line)
        assert {"event", "level", "timestamp"} <= set(event), line
    assert worker.returncode == 0, stderr
