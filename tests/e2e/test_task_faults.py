"""Tasks survive their workers: killed `gateway worker` processes and a `kill -9`'d gateway,
on both stores; and two replicas on one Redis share the queue.

After each fault every task reaches a terminal state (taken again by a worker once its lease
ran out, or failed and refunded after too many attempts), every task is debited once and
refunded at most once, and the wallet equals the sum of its ledger.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.media_support import (
    TERMINAL,
    assert_books_balance,
    fetch_unsigned,
    post_task,
    root_of,
    task_entries,
    wait_for_task,
)
from tests.support import preloaded
from tests.support.gateway_process import GatewayProcess, client_for, start_gateway
from tests.support.redis_server import RedisServer
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.waiting import wait_until

# Long enough to be killed mid-way; the lease short enough that a dead worker's task moves on.
SLOW = "[[sim:task_ms=2500]]"


def _start(workdir: Path, store_url: str | None, **env: str) -> tuple[GatewayProcess, str]:
    gateway = start_gateway(workdir, MEDIA_CONFIG, store_url=store_url, extra_env=env)
    try:
        if store_url is None:
            assert gateway.api_key
            return gateway, gateway.api_key
        key = gateway.keys.get("default") or gateway.new_key("default")
        gateway.keys["default"] = key
        gateway.grant("default", "5000")
    except BaseException:
        gateway.stop()  # not left running when the test cannot have it
        raise
    return gateway, key


def _worker(gateway: GatewayProcess, log: Path) -> preloaded.Process:
    with log.open("ab") as out:
        return preloaded.spawn(
            ["worker", "--concurrency", "4"],
            env=gateway.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _create_slow_tasks(client: httpx.Client) -> list[str]:
    ids = []
    for i in range(3):
        body = {"model": "image-model-2", "prompt": f"harbour {i} {SLOW}", "n": 2}
        ids.append(post_task(client, "/v1/images/generations", body)["task_id"])
    for model in ("alpha-5.5", "beta-music-2.6"):
        body = {"model": model, "prompt": f"a slow waltz {SLOW}"}
        ids.append(post_task(client, "/v1/music/text-to-music", body)["task_id"])
    return ids


def _wait_running(client: httpx.Client, ids: list[str]) -> None:
    def statuses() -> dict[str, Any]:
        return {i: client.get(f"/v1/tasks/{i}").json()["status"] for i in ids}

    wait_until(statuses, lambda s: "running" in s.values(), timeout=20, what="a running task")


def _check_all_ended(client: httpx.Client, ids: list[str]) -> None:
    for task_id in ids:
        task = wait_for_task(client, task_id, timeout=60)
        assert task["status"] in TERMINAL
        entries = task_entries(client, task_id)
        kinds = [e["kind"] for e in entries]
        assert kinds.count("debit") == 1, kinds
        assert kinds.count("refund") <= 1, kinds
        if task["status"] == "succeeded":
            assert task["output"], task
        else:  # failed after too many lost workers: refunded in full
            assert task["billing"]["refunded_credits"] == task["billing"]["charged_credits"]
    assert_books_balance(client)


def test_a_killed_worker_process_leaves_no_task_behind(
    store_url: str | None, tmp_path: Path
) -> None:
    gateway, key = _start(tmp_path / "gw", store_url, GATEWAY_WORKERS="0")
    first = _worker(gateway, tmp_path / "worker-1.log")
    second: preloaded.Process | None = None
    try:
        with client_for(gateway, key, timeout=10) as client:
            ids = _create_slow_tasks(client)
            _wait_running(client, ids)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
            second = _worker(gateway, tmp_path / "worker-2.log")
            _check_all_ended(client, ids)
            assert any(client.get(f"/v1/tasks/{i}").json()["status"] == "succeeded" for i in ids)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        gateway.stop()


def test_a_gateway_killed_mid_task_finishes_its_tasks_after_a_restart(
    store_url: str | None, tmp_path: Path
) -> None:
    workdir = tmp_path / "gw"
    gateway, key = _start(workdir, store_url)
    with client_for(gateway, key, timeout=10) as client:
        ids = _create_slow_tasks(client)
        _wait_running(client, ids)
    os.kill(gateway.process.pid, signal.SIGKILL)
    gateway.process.wait(timeout=10)

    restarted, _ = _start(workdir, store_url)
    try:
        with client_for(restarted, key, timeout=10) as client:
            _check_all_ended(client, ids)
    finally:
        restarted.stop()


def test_a_task_created_on_one_replica_runs_on_another(redis_binary: str, tmp_path: Path) -> None:
    server = RedisServer(redis_binary, tmp_path / "redis")
    server.workdir.mkdir()
    server.start()
    shared = {
        "GATEWAY_ARTIFACTS_DIR": str(tmp_path / "artifacts"),
        "GATEWAY_SIGNING_SECRET": "replicas-share-this-secret",
    }
    front, key = _start(tmp_path / "front", server.url, GATEWAY_WORKERS="0", **shared)
    back = start_gateway(tmp_path / "back", MEDIA_CONFIG, store_url=server.url, extra_env=shared)
    try:
        with client_for(front, key, timeout=10) as client:
            body = {"model": "image-model-2", "prompt": "two replicas", "aspect_ratio": "4:3"}
            task_id = post_task(client, "/v1/images/generations", body)["task_id"]
            task = wait_for_task(client, task_id)
            assert task["status"] == "succeeded", task
            image = task["output"]["images"][0]
            content = fetch_unsigned(root_of(front.base_url), image["url"])
            assert content.status_code == 200
            assert content.content.startswith(b"\x89PNG")
            assert (image["width"], image["height"]) == (512, 384)
            assert_books_balance(client)
    finally:
        back.stop()
        front.stop()
        server.stop()
