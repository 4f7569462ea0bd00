"""The first hour: every start-up mistake is one clear line and exit 2, before any URL or key
is printed; `serve` works from any directory; it says how to begin on Redis; SIGTERM drains."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_process import ROOT, start_gateway
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_until

CONFIG = (ROOT / "config" / "gateway.toml").read_text()


def _serve(
    workdir: Path, *, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "GATEWAY_DATA_DIR": str(workdir / "data"),
        "GATEWAY_PORT": str(free_port()),
        "PYTHONPATH": str(ROOT),
    }
    for name in ("GATEWAY_CONFIG", "GATEWAY_STORE_URL"):
        environment.pop(name, None)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "gateway.app.cli", "serve"],
        env=environment,
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _one_clear_line(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Gateway base URL" not in result.stdout and "API key" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gateway: ") and needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"GATEWAY_PORT": "eighty"}, "GATEWAY_PORT must be a whole number"),
        ({"GATEWAY_PORT": "70000"}, "GATEWAY_PORT must be a whole number from 1 to 65535"),
        ({"GATEWAY_LOG_LEVEL": "loud"}, "GATEWAY_LOG_LEVEL must be one of"),
        ({"GATEWAY_WORKERS": "-1"}, "GATEWAY_WORKERS"),
        ({"GATEWAY_STORE_URL": "mongodb://db/1"}, "unsupported store URL scheme 'mongodb'"),
    ],
)
def test_settings_mistakes(tmp_path: Path, env: dict[str, str], needle: str) -> None:
    _one_clear_line(_serve(tmp_path, **env), needle)


def test_an_unset_provider_key(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        CONFIG
        + '\n[providers.up]\nkind = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n'
        + 'api_key_env = "GATEWAY_TEST_NEVER_SET"\n'
    )
    result = _serve(tmp_path, GATEWAY_CONFIG=str(config))
    _one_clear_line(
        result, "providers.up.api_key_env: environment variable 'GATEWAY_TEST_NEVER_SET'"
    )


def test_a_busy_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _one_clear_line(
            _serve(tmp_path, GATEWAY_PORT=str(port)), f"cannot listen on 127.0.0.1:{port}"
        )


def test_a_second_serve_on_the_same_sqlite_file(tmp_path: Path) -> None:
    first = start_gateway(tmp_path, CONFIG)
    try:
        result = _serve(tmp_path, GATEWAY_CONFIG=str(tmp_path / "gateway.toml"))
        _one_clear_line(result, "another gateway process is serving from")
    finally:
        first.stop()


def test_serve_works_from_any_directory_with_the_packaged_routing_file(tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "GATEWAY_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
    }
    environment.pop("GATEWAY_CONFIG", None)
    environment["GATEWAY_PORT"] = port = str(free_port())
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway.app.cli", "serve"],
        env=environment,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: _healthy(port), timeout=30, what="the gateway to answer /health")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert "Routing file: " in out and "gateway/config/default.toml" in out, out
    assert "API key (tenant default): gw-" in out
    assert "Gateway stopped." in err  # SIGTERM drains and says so, like SIGINT
    assert process.returncode == 0


def test_the_packaged_routing_file_is_the_documented_one() -> None:
    packaged = ROOT / "gateway" / "config" / "default.toml"
    assert packaged.read_text() == (ROOT / "config" / "gateway.toml").read_text()


def test_serve_on_redis_without_keys_says_how_to_begin(redis_binary: str, tmp_path: Path) -> None:
    server = RedisServer(redis_binary, tmp_path)
    server.start()
    try:
        gateway = start_gateway(tmp_path / "gw", CONFIG, store_url=server.url)
        try:
            assert "gateway keys create --tenant NAME" in gateway.logs()
            assert "gateway credits grant --tenant NAME" in gateway.logs()
        finally:
            gateway.stop()
    finally:
        server.stop()


def _healthy(port: str) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_app_loads_neither_pydantic_nor_rich(tmp_path: Path) -> None:
    """Litestar adds its pydantic plugin when pydantic is installed (it is here, beside the
    SDKs), and structlog loads rich (installed with Litestar): the gateway's app does without
    both (gateway/app/factory.py, gateway/logging.py), a tenth of a second of every start."""
    probe = (
        "import sys; from gateway.app.factory import create_app; app = create_app(); "
        "print(any('Pydantic' in type(p).__name__ for p in app.plugins), "
        "'pydantic' in sys.modules, 'rich' in sys.modules)"
    )
    environment = {**os.environ, "GATEWAY_DATA_DIR": str(tmp_path / "data")}
    environment.pop("GATEWAY_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split("\n")[-2] == "False False False", done.stdout
