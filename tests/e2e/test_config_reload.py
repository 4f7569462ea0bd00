"""The routing file changes under a running, loaded gateway: on disk and on SIGHUP.

While clients keep calling, a valid new file is picked up (new model, new `auto` pick, new
version in /v1/health) with no failed request; a broken file is refused, the version in force
stays and keeps serving, and the log says why.

The wallet is never what refuses a call here: each call holds 61.44 credits while it runs (4,096
output tokens at $15 per million, x1000) and costs under one, and the load runs until
conditions are met, so the starting grant covers any number of calls it can make in the time.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.waiting import wait_until

BASE = """
[gateway]
starting_grant_credits = 1000000

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


class Load:
    """Chat calls in a closed loop from a few threads; every status kept."""

    def __init__(self, gateway: GatewayProcess) -> None:
        self.gateway = gateway
        self.statuses: list[int] = []
        self.answers: Counter[str] = Counter()
        """Successful answers by the model that gave them."""
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

    @property
    def models(self) -> set[str]:
        return set(self.answers)

    def answered(self, model: str | None = None, more_than: int = 0) -> int:
        """How many calls `model` (any model: None) has answered, once more than `more_than`
        (waits for it)."""

        def count() -> int:
            assert set(self.statuses) <= {200}, set(self.statuses)  # fail fast on a refusal
            return sum(self.answers.values()) if model is None else self.answers[model]

        return wait_until(count, lambda n: n > more_than, what=f"answers from {model or 'any'}")

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.gateway.api_key}"}
        body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "stream": False}
        with httpx.Client(base_url=self.gateway.base_url, headers=headers, timeout=30) as client:
            while not self._stop.is_set():
                response = client.post("/chat/completions", json=body)
                self.statuses.append(response.status_code)
                if response.status_code == 200:
                    self.answers[response.json()["model"]] += 1


def _start(tmp_path: Path, **env: str) -> tuple[GatewayProcess, Path]:
    gateway = start_gateway(tmp_path, _config(second=False), extra_env=env)
    return gateway, tmp_path / "gateway.toml"


def test_a_changed_file_is_picked_up_under_load(tmp_path: Path) -> None:
    gateway, path = _start(tmp_path)
    try:
        first = _health(gateway)["config_version"]
        with Load(gateway) as load:
            load.answered(more_than=50)  # under load before the change
            path.write_text(_config(second=True))
            wait_until(lambda: _health(gateway)["config_version"] != first, what="the new version")
            load.answered("sim-chat-2", more_than=50)  # and after it, on the new pick
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
            load.answered(more_than=50)
            path.write_text(_config(second=True))
            time.sleep(1.5)  # the behaviour under test: past the default poll (1 s), no reload
            assert _health(gateway)["config_version"] == first
            gateway.process.send_signal(signal.SIGHUP)
            wait_until(
                lambda: _health(gateway)["config_version"] != first, what="the SIGHUP reload"
            )
            second = _health(gateway)["config_version"]
            load.answered("sim-chat-2", more_than=50)

            path.write_text(_config(second=True).replace('capability = "chat"', "capability = 7"))
            gateway.process.send_signal(signal.SIGHUP)
            wait_until(lambda: '"config_rejected"' in gateway.logs(), what="the rejection")
            load.answered("sim-chat-2", more_than=load.answered("sim-chat-2") + 50)
        assert _health(gateway)["config_version"] == second
        assert load.statuses and set(load.statuses) == {200}, set(load.statuses)
        rejected = [
            json.loads(line) for line in gateway.logs().splitlines() if '"config_rejected"' in line
        ]
        assert "models[0].capability" in rejected[0]["error"]
        assert rejected[0]["version_in_force"] == second
    finally:
        gateway.stop()
