"""The routing file changes under a running, loaded gateway: on disk and on SIGHUP.

While clients keep calling, a valid new file is picked up (new model, new `auto` pick, new
version in /v1/health) with no failed request; a broken file is refused, the version in force
stays and keeps serving, and the log says why.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.e2e.gateway_process import GatewayProcess, start_gateway

BASE = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.sim]
kind = "simulator"

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}
{extra}
[routing.auto]
chat = [{auto}]

[tenants.default]
"""
SECOND_MODEL = """
[[models]]
id = "sim-chat-2"
provider = "sim"
capability = "chat"
pricing = { input_usd_per_mtok = 1, output_usd_per_mtok = 2 }
"""


def _config(*, second: bool) -> str:
    if second:
        return BASE.format(extra=SECOND_MODEL, auto='"sim-chat-2", "sim-chat-1"')
    return BASE.format(extra="", auto='"sim-chat-1"')


def _health(gateway: GatewayProcess) -> dict[str, str]:
    return httpx.get(f"{gateway.base_url}/health", timeout=2).json()  # type: ignore[no-any-return]


def _wait(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Load:
    """Chat calls in a closed loop from a few threads; every status kept."""

    def __init__(self, gateway: GatewayProcess) -> None:
        self.gateway = gateway
        self.statuses: list[int] = []
        self.models: set[str] = set()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run) for _ in range(3)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.gateway.api_key}"}
        body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "stream": False}
        with httpx.Client(base_url=self.gateway.base_url, headers=headers, timeout=30) as client:
            while not self._stop.is_set():
                response = client.post("/chat/completions", json=body)
                self.statuses.append(response.status_code)
                if response.status_code == 200:
                    self.models.add(response.json()["model"])


def _start(tmp_path: Path, **env: str) -> tuple[GatewayProcess, Path]:
    gateway = start_gateway(tmp_path, _config(second=False), extra_env=env)
    return gateway, tmp_path / "gateway.toml"


def test_a_changed_file_is_picked_up_under_load(tmp_path: Path) -> None:
    gateway, path = _start(tmp_path)
    try:
        first = _health(gateway)["config_version"]
        with Load(gateway) as load:
            time.sleep(0.5)
            path.write_text(_config(second=True))
            _wait(lambda: _health(gateway)["config_version"] != first, "the new version")
            time.sleep(0.5)
        assert load.statuses and set(load.statuses) == {200}, set(load.statuses)
        assert load.models == {"sim-chat-1", "sim-chat-2"}  # auto switched mid-load
        listed = httpx.get(
            f"{gateway.base_url}/models", headers={"Authorization": f"Bearer {gateway.api_key}"}
        ).json()
        assert {m["id"] for m in listed["data"]} == {"sim-chat-1", "sim-chat-2"}
        assert '"config_reloaded"' in gateway.logs()
    finally:
        gateway.stop()


def test_sighup_reloads_and_a_broken_file_leaves_the_old_one_serving(tmp_path: Path) -> None:
    gateway, path = _start(tmp_path, GATEWAY_CONFIG_POLL_SECONDS="0")
    try:
        first = _health(gateway)["config_version"]
        with Load(gateway) as load:
            path.write_text(_config(second=True))
            time.sleep(0.3)
            assert _health(gateway)["config_version"] == first  # no polling: waits for SIGHUP
            gateway.process.send_signal(signal.SIGHUP)
            _wait(lambda: _health(gateway)["config_version"] != first, "the SIGHUP reload")
            second = _health(gateway)["config_version"]

            path.write_text(_config(second=True).replace('capability = "chat"', "capability = 7"))
            gateway.process.send_signal(signal.SIGHUP)
            _wait(lambda: '"config_rejected"' in gateway.logs(), "the rejection in the log")
            time.sleep(0.3)
        assert _health(gateway)["config_version"] == second
        assert load.statuses and set(load.statuses) == {200}, set(load.statuses)
        rejected = [
            json.loads(line) for line in gateway.logs().splitlines() if '"config_rejected"' in line
        ]
        assert "models[0].capability" in rejected[0]["error"]
        assert rejected[0]["version_in_force"] == second
    finally:
        gateway.stop()
