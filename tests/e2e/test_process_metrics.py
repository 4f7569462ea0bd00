"""`/metrics` carries the standard process metrics (memory, CPU, file descriptors, start time,
`python_info`) of the serving process, in multiprocess mode too, and answers HEAD."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import SIMULATOR_CONFIG

PROCESS_METRICS = {
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
    "python_info",
}


def _start_time(pid: int) -> float:
    """When `pid` started, in seconds since the epoch, read from /proc as Prometheus does."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = os.sysconf("SC_CLK_TCK")
    boot = next(
        float(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    return boot + float(fields[19]) / ticks


def _scrape(gateway: GatewayProcess) -> dict[str, float]:
    root = gateway.base_url.removesuffix("/v1")
    response = httpx.get(f"{root}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


@pytest.mark.parametrize("multiprocess", [False, True], ids=["one-process", "multiprocess"])
def test_the_serving_process_metrics_are_scraped(tmp_path: Path, multiprocess: bool) -> None:
    env = {}
    if multiprocess:
        shared = tmp_path / "prometheus"
        shared.mkdir()
        env["PROMETHEUS_MULTIPROC_DIR"] = str(shared)
    gateway = start_gateway(tmp_path / "gw", SIMULATOR_CONFIG, extra_env=env)
    try:
        samples = _scrape(gateway)
        assert set(samples) >= PROCESS_METRICS, PROCESS_METRICS - set(samples)
        assert samples["process_start_time_seconds"] == pytest.approx(
            _start_time(gateway.process.pid), abs=0.05
        )
        assert samples["process_resident_memory_bytes"] > 10 * 2**20
        assert samples["process_open_fds"] > 3
        assert samples["process_cpu_seconds_total"] > 0
        assert any(name.startswith("gateway_") for name in samples)  # beside the gateway's own
    finally:
        gateway.stop()


def test_head_metrics_answers_like_get_without_a_body(tmp_path: Path) -> None:
    gateway = start_gateway(tmp_path / "on", SIMULATOR_CONFIG)
    off = start_gateway(tmp_path / "off", SIMULATOR_CONFIG, extra_env={"GATEWAY_METRICS": "off"})
    try:
        root = gateway.base_url.removesuffix("/v1")
        head = httpx.head(f"{root}/metrics", timeout=10)
        get = httpx.get(f"{root}/metrics", timeout=10)
        assert head.status_code == get.status_code == 200
        assert head.headers["content-type"] == get.headers["content-type"]
        assert head.content == b""
        off_root = off.base_url.removesuffix("/v1")
        assert httpx.head(f"{off_root}/metrics", timeout=10).status_code == 404
    finally:
        gateway.stop()
        off.stop()
