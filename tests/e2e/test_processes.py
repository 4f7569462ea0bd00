"""`gateway serve --processes 2` on a private Redis, as operators and clients meet it.

Both processes answer on the one port (the pid of each request's log line), chat and a task
work, one scrape of `/metrics` counts the requests of both, SIGTERM drains streams in flight
in both before the supervisor exits 0, a routing-file change (on disk, or SIGHUP to the
supervisor) reaches both, a killed process is logged and replaced, a killed supervisor takes
its processes with it, and SQLite refuses more than one process with one line and exit 2.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app.processes import worker_shares
from tests.e2e.media_support import post_task, wait_for_task
from tests.support.gateway_process import ROOT, GatewayProcess, client_for
from tests.support.metrics_scrape import Samples, scrape, value
from tests.support.ports import free_port
from tests.support.process_group import (
    alive,
    events,
    identity,
    serving_pids,
    start_processes,
    wait_for_events,
)
from tests.support.redis_server import RedisServer
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.waiting import wait_until

CHAT = "/v1/chat/completions"
SLOW_MODEL = """
[providers.sim_slow]
kind = "simulator"
tokens_per_second = 20

[[models]]
id = "sim-slow"
provider = "sim_slow"
capability = "chat"
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }
"""
CONFIG = MEDIA_CONFIG + SLOW_MODEL
NEW_MODEL = """
[[models]]
id = "sim-chat-new"
provider = "sim"
capability = "chat"
pricing = { input_usd_per_mtok = 1, output_usd_per_mtok = 2 }
"""


@pytest.fixture
def group(redis_server: RedisServer, tmp_path: Path) -> Iterator[tuple[GatewayProcess, str]]:
    """Two serving processes on a private Redis, and a key of `default` with credits."""
    gateway = start_processes(tmp_path / "gw", CONFIG, redis_server.url)
    try:
        key = gateway.new_key("default")
        gateway.grant("default", "1000")
        yield gateway, key
    finally:
        gateway.stop()


def _chats(gateway: GatewayProcess, key: str, count: int) -> list[str]:
    """`count` chat calls, each on a connection of its own (so the kernel places each one);
    their request ids."""
    ids = []
    for _ in range(count):
        request_id = f"processes-{uuid.uuid4().hex}"
        response = httpx.post(
            f"{gateway.base_url}/chat/completions",
            json={"model": "sim-chat-1", "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {key}", "X-Request-Id": request_id},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        ids.append(request_id)
    return ids


def _answered_by(gateway: GatewayProcess, request_ids: list[str]) -> dict[str, int]:
    """The pid that logged each request (waits for the lines: logs are written in batches)."""

    def found() -> dict[str, int]:
        return {
            record["request_id"]: record["pid"]
            for record in events(gateway, "request")
            if record.get("request_id") in request_ids
        }

    return wait_until(found, lambda pids: len(pids) == len(request_ids), what="the request lines")


def _series(samples: Samples, name: str) -> list[tuple[dict[str, str], float]]:
    return [(dict(labels), v) for (n, labels), v in samples.items() if n == name]


def _pids_in(samples: Samples, name: str, **labels: str) -> set[int]:
    """The `pid` labels of `name`'s series that have `labels` and the value 1."""
    return {
        int(series["pid"])
        for series, v in _series(samples, name)
        if v == 1 and labels.items() <= series.items()
    }


def _serve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [sys.executable, "-m", "gateway.app.cli", "serve", *args],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _refused_with(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Gateway base URL" not in result.stdout, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gateway: "), result.stderr
    assert needle in lines[0], lines[0]


def test_two_processes_serve_one_port_chat_tasks_and_one_scrape(
    group: tuple[GatewayProcess, str],
) -> None:
    gateway, key = group
    assert "Processes: 2 serving the port (task workers 2 + 2)" in gateway.logs()
    children = serving_pids(gateway)
    assert len(children) == 2 and gateway.process.pid not in children

    request_ids = _chats(gateway, key, 40)
    assert set(_answered_by(gateway, request_ids).values()) == children

    with client_for(gateway, key) as client:
        task = post_task(client, "/v1/images/generations", {"model": "auto", "prompt": "a boat"})
        assert wait_for_task(client, task["task_id"])["status"] == "succeeded"
        version = client.get("/v1/health").json()["config_version"]

    def scraped() -> Samples:
        return scrape(gateway)[1]

    # Each process writes its facts once a second: wait for both in one scrape.
    samples = wait_until(
        scraped,
        lambda s: _pids_in(s, "gateway_config_info", version=version) == children,
        what="both processes' routing-file version in one scrape",
    )
    chat = {"route": CHAT, "method": "POST", "status": "200", "model": "sim-chat-1"}
    assert value(samples, "gateway_requests_total", **chat) == 40  # both processes' counts
    image = {"capability": "text_to_image", "model": "image-model-2"}
    assert value(samples, "gateway_tasks_finished_total", **image, status="succeeded") == 1
    assert _pids_in(samples, "gateway_circuit_breaker_state", provider="sim", state="closed") == (
        children
    )
    started = {int(s["pid"]) for s, _ in _series(samples, "process_start_time_seconds")}
    assert started == children  # each process's own, not the answering one's
    assert value(samples, "gateway_store_up") == 1  # read once, by the answering process

    # The port is this gateway's: neither another group nor one process can join it.
    port = str(httpx.URL(gateway.base_url).port)
    env = {k: v for k, v in gateway.env.items() if k != "GATEWAY_PROCESSES"}
    _refused_with(_serve({**env, "GATEWAY_PORT": port}, "--processes", "2"), "cannot listen on")
    _refused_with(_serve({**env, "GATEWAY_PORT": port}), "cannot listen on")


def test_sigterm_drains_the_streams_of_every_process(group: tuple[GatewayProcess, str]) -> None:
    gateway, key = group
    children = serving_pids(gateway)
    count = 16  # each on its own connection: all on one process has odds of 2 in 65,536
    first_chunk = [threading.Event() for _ in range(count)]
    outcomes: list[dict[str, Any]] = [{} for _ in range(count)]
    body = {
        "model": "sim-slow",
        "stream": True,
        "messages": [{"role": "user", "content": "[[sim:tokens=60]] a slow story"}],
    }

    def stream(i: int) -> None:
        request_id = f"drain-{i}-{uuid.uuid4().hex}"
        outcomes[i]["request_id"] = request_id
        headers = {"Authorization": f"Bearer {key}", "X-Request-Id": request_id}
        with (
            httpx.Client(timeout=30) as client,
            client.stream(
                "POST", f"{gateway.base_url}/chat/completions", json=body, headers=headers
            ) as response,
        ):
            outcomes[i]["status"] = response.status_code
            lines = []
            for line in response.iter_lines():
                if line:
                    lines.append(line)
                if line.startswith("data: {"):
                    first_chunk[i].set()
            outcomes[i]["lines"] = lines

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for event in first_chunk:
        assert event.wait(30), "a stream never started"
    gateway.process.send_signal(signal.SIGTERM)  # every stream is in flight (3 s each)
    assert gateway.process.wait(timeout=60) == 0
    for thread in threads:
        thread.join(timeout=30)

    for outcome in outcomes:
        assert outcome["status"] == 200
        assert outcome["lines"][-1] == "data: [DONE]", outcome["lines"][-3:]
        assert len(outcome["lines"]) > 60  # a chunk a token: all of the answer came
    answered = _answered_by(gateway, [outcome["request_id"] for outcome in outcomes])
    assert set(answered.values()) == children  # both drained theirs
    stopped = {record["process"]: record for record in events(gateway, "process_stopped")}
    assert set(stopped) == children and all(r["exit_code"] == 0 for r in stopped.values())
    assert "Gateway stopped." in gateway.logs()
    assert not any((gateway.log_path.parent / "tmp").iterdir())  # its metrics folder is gone
    with (
        pytest.raises(OSError),
        socket.create_connection(("127.0.0.1", httpx.URL(gateway.base_url).port), timeout=2),
    ):
        pass


@pytest.mark.parametrize("how", ["file_changed", "sighup"])
def test_a_routing_file_change_reaches_every_process(
    redis_server: RedisServer, tmp_path: Path, how: str
) -> None:
    poll = "0.2" if how == "file_changed" else "0"  # 0: SIGHUP only
    gateway = start_processes(
        tmp_path / "gw",
        CONFIG,
        redis_server.url,
        extra_env={"GATEWAY_CONFIG_POLL_SECONDS": poll},
    )
    try:
        key = gateway.new_key("default")
        children = serving_pids(gateway)
        (tmp_path / "gw" / "gateway.toml").write_text(CONFIG + NEW_MODEL)
        if how == "sighup":
            gateway.process.send_signal(signal.SIGHUP)  # to the supervisor, which passes it on
        reloaded = wait_for_events(gateway, "config_reloaded", children, reason=how)
        assert len({record["version"] for record in reloaded}) == 1
        for _ in range(20):  # new connections: both processes list the new model
            listed = httpx.get(
                f"{gateway.base_url}/models",
                headers={"Authorization": f"Bearer {key}"},
                timeout=10,
            )
            assert "sim-chat-new" in {m["id"] for m in listed.json()["data"]}
    finally:
        gateway.stop()


def test_a_killed_process_is_logged_and_replaced(group: tuple[GatewayProcess, str]) -> None:
    gateway, key = group
    before = _chats(gateway, key, 20)
    _answered_by(gateway, before)
    children = serving_pids(gateway)
    victim = min(children)
    identity(victim, parent=gateway.process.pid)  # the supervisor's child, not a reused pid
    os.kill(victim, signal.SIGKILL)

    exited = wait_until(
        lambda: [r for r in events(gateway, "process_exited") if r["process"] == victim],
        what="the supervisor to report the killed process",
    )
    assert exited[0]["level"] == "error" and exited[0]["signal"] == "SIGKILL"
    now = wait_until(
        lambda: serving_pids(gateway),
        lambda pids: len(pids) == 2 and victim not in pids,
        what="a replacement",
    )
    replacement = (now - children).pop()
    started = [r for r in events(gateway, "process_started") if r["process"] == replacement]
    assert started[0]["slot"] == exited[0]["slot"]
    wait_for_events(gateway, "config_loaded", {replacement})

    after = _chats(gateway, key, 40)
    assert set(_answered_by(gateway, after).values()) == now  # the replacement serves too
    samples = wait_until(
        lambda: scrape(gateway)[1],
        lambda s: _pids_in(s, "gateway_config_info") == now,
        what="the scrape to show the live processes only",
    )
    chat = {"route": CHAT, "method": "POST", "status": "200", "model": "sim-chat-1"}
    assert value(samples, "gateway_requests_total", **chat) == 60  # the dead one's count stays


def test_a_killed_supervisor_takes_its_processes_with_it(
    group: tuple[GatewayProcess, str],
) -> None:
    gateway, _ = group
    children = [identity(pid, parent=gateway.process.pid) for pid in serving_pids(gateway)]
    gateway.process.kill()
    gateway.process.wait(timeout=10)
    wait_until(
        lambda: not any(alive(child) for child in children),
        what="the serving processes to stop with their supervisor",
    )
    port = httpx.URL(gateway.base_url).port
    assert port is not None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # free again: nothing is left listening


@pytest.mark.parametrize(
    ("env", "args", "needle"),
    [
        ({"GATEWAY_PROCESSES": "2"}, (), "--processes 2 needs a Redis store"),
        ({}, ("--processes", "3"), "--processes 3 needs a Redis store"),
        ({}, ("--processes", "0"), "--processes must be from 1 to 256 (got 0)"),
        ({"GATEWAY_PROCESSES": "0"}, (), "GATEWAY_PROCESSES must be a whole number from 1 to 256"),
    ],
)
def test_several_processes_need_redis(
    tmp_path: Path, env: dict[str, str], args: tuple[str, ...], needle: str
) -> None:
    settings = {
        "GATEWAY_DATA_DIR": str(tmp_path / "data"),
        "GATEWAY_PORT": str(free_port()),
        "GATEWAY_STORE_URL": "",
        **env,
    }
    _refused_with(_serve(settings, *args), needle)
    assert not (tmp_path / "data").exists()  # refused before anything was made


def test_processes_that_cannot_start_stop_the_gateway() -> None:
    """The supervisor's answer to a process whose start-up failed (exit 3): no replacement
    (it would fail the same way), the others stopped, exit 1."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.failing_start", str(free_port())],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    failed = [line for line in lines if line["event"] == "process_start_failed"]
    assert failed and failed[0]["level"] == "error" and failed[0]["exit_code"] == 3
    assert sum(line["event"] == "process_started" for line in lines) == 2  # none replaced


@pytest.mark.parametrize(
    ("workers", "processes", "shares"),
    [(4, 2, [2, 2]), (4, 3, [2, 1, 1]), (1, 2, [1, 0]), (0, 2, [0, 0]), (5, 4, [2, 1, 1, 1])],
)
def test_task_workers_are_split_between_the_processes(
    workers: int, processes: int, shares: list[int]
) -> None:
    """GATEWAY_WORKERS stays the replica's total (README, docs/deploy.md)."""
    assert worker_shares(workers, processes) == shares
