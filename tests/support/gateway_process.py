"""Run real `gateway serve` processes on free ports for end-to-end tests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support import preloaded
from tests.support.ports import free_port
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "GatewayProcess", "client_for", "start_gateway"]


@dataclass
class GatewayProcess:
    base_url: str
    env: dict[str, str]
    process: preloaded.Process
    log_path: Path
    api_key: str | None = None
    keys: dict[str, str] = field(default_factory=dict)

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`gateway ARGS` with the gateway's settings (tests/support/preloaded.py)."""
        result = preloaded.run(args, env=self.env, cwd=ROOT, timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"gateway {' '.join(args)} failed: {result.stderr}")
        return result

    def new_key(self, tenant: str) -> str:
        return self.cli("keys", "create", "--tenant", tenant).stdout.strip()

    def grant(self, tenant: str, amount: str) -> None:
        self.cli("credits", "grant", "--tenant", tenant, "--amount", amount, "--reason", "test")

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        """The log's JSON lines, decoded (anything else the process printed is left out)."""
        return [json.loads(line) for line in self.logs().splitlines() if line.startswith("{")]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_gateway(
    workdir: Path,
    config_text: str,
    *,
    store_url: str | None = None,
    extra_env: dict[str, str] | None = None,
    launcher: Sequence[str] = (),
    fresh: bool = False,
) -> GatewayProcess:
    """`gateway serve` on a free port, answering /health when this returns.

    It is forked from the test process's preloaded interpreter (tests/support/preloaded.py)
    unless `fresh` (a new interpreter: for tests that measure the process's memory) or
    `launcher`: a command the server runs under (e.g. `nsenter ... --`), which must exec it in
    place so that `process` is the gateway itself."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "gateway.toml"
    config_path.write_text(config_text)
    port = free_port()
    env = {
        **os.environ,
        "GATEWAY_CONFIG": str(config_path),
        "GATEWAY_DATA_DIR": str(workdir / "data"),
        "GATEWAY_LOG_LEVEL": "info",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("GATEWAY_STORE_URL", None)
    if store_url:
        env["GATEWAY_STORE_URL"] = store_url
    env.update(extra_env or {})
    log_path = workdir / f"gateway-{port}.log"
    serve = ["serve", "--host", "127.0.0.1", "--port", str(port)]
    process: preloaded.Process
    with log_path.open("wb") as log:
        if launcher or fresh:
            process = subprocess.Popen(
                [*launcher, sys.executable, "-m", "gateway.app.cli", *serve],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        else:
            process = preloaded.spawn(serve, env=env, stdout=log, stderr=subprocess.STDOUT)
    gateway = GatewayProcess(
        base_url=f"http://127.0.0.1:{port}/v1", env=env, process=process, log_path=log_path
    )
    try:
        wait_until(lambda: _healthy(gateway), timeout=30, what="the gateway to answer /health")
    except AssertionError:
        gateway.stop()
        raise AssertionError(f"gateway did not become healthy:\n{gateway.logs()}") from None
    match = re.search(r"API key \(tenant default\): (\S+)", gateway.logs())
    if match:
        gateway.api_key = match.group(1)
    return gateway


def _healthy(gateway: GatewayProcess) -> bool:
    if gateway.process.poll() is not None:
        raise AssertionError(f"gateway exited early:\n{gateway.logs()}")
    try:
        return httpx.get(f"{gateway.base_url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def client_for(gateway: GatewayProcess, key: str, *, timeout: float = 30) -> httpx.Client:
    """A client of the gateway's root (paths start with `/v1`) with `key` as its bearer."""
    return httpx.Client(
        base_url=gateway.base_url.removesuffix("/v1"),
        headers={"Authorization": f"Bearer {key}"},
        timeout=timeout,
    )
