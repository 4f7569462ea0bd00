"""The task path and uploads while Redis is paused (SIGSTOP) and resumed, under load.

tests/e2e/test_store_faults.py does this for chat (money per call); here tasks are running in
the gateway's worker, creates and uploads keep coming, and the store stops answering for
longer than its 2 s timeout. Creates and uploads meet a retryable 503 within the store's
timeout (never a hang); running tasks finish or fail refunded once the store is back (leases
ran out meanwhile: they are claimed again); and the common end checks hold
(tests/e2e/fault_checks.py), on the same process, which answers health 200 again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.fault_checks import Books, Failure, assert_retryable, check_all
from tests.e2e.media_support import post_task, root_of, wav_bytes
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.redis_server import RedisServer
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until

pytestmark = STORE_FAULTS

CONFIG = MEDIA_CONFIG.replace("task_seconds = 0.3", "task_seconds = 1.5")
STALL_SECONDS = 5.0
STORE_BOUND = 8.0  # the store's 2 s timeout and one retry, with a wide margin


@pytest.fixture
def gateway(redis_server: RedisServer, tmp_path: Path) -> Iterator[tuple[GatewayProcess, str]]:
    env = {"GATEWAY_ARTIFACTS_DIR": str(tmp_path / "artifacts")}
    process = start_gateway(tmp_path / "gw", CONFIG, store_url=redis_server.url, extra_env=env)
    key = process.new_key("default")
    process.grant("default", "100000")
    yield process, key
    process.stop()


def _load(
    base: str, key: str, stop: threading.Event, failures: list[Failure], created: list[str]
) -> None:
    """Creates and uploads in turn until `stop`; the ids of the tasks created go to `created`."""
    audio = wav_bytes(0.5)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as c:
        i = 0
        while not stop.is_set():
            started = time.monotonic()
            try:
                if i % 3 == 2:
                    files = {"file": ("a.wav", audio, "audio/wav")}
                    response = c.post("/v1/uploads", files=files)
                else:
                    body = {"model": "image-model-2", "prompt": f"a quay {i}"}
                    response = c.post("/v1/images/generations", json=body)
            except httpx.HTTPError as exc:
                failures.append(Failure(f"call {i}", -1, repr(exc), time.monotonic() - started))
            else:
                if response.status_code == 202:
                    created.append(response.json()["task_id"])
                elif response.status_code != 201:
                    seconds = time.monotonic() - started
                    failures.append(
                        Failure(f"call {i}", response.status_code, response.text, seconds)
                    )
            i += 1
            stop.wait(0.05)


def test_tasks_and_uploads_live_through_a_paused_store(
    gateway: tuple[GatewayProcess, str], redis_server: RedisServer, tmp_path: Path
) -> None:
    process, key = gateway
    base = root_of(process.base_url)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as client:
        running = [
            post_task(client, "/v1/images/generations", {"model": "image-model-2", "prompt": "p"})
            for _ in range(4)
        ]
    failures: list[Failure] = []
    stop = threading.Event()
    created: list[str] = []
    loader = threading.Thread(target=_load, args=(base, key, stop, failures, created))
    loader.start()
    try:
        wait_until(lambda: len(created) >= 5, what="tasks created before the stall")
        redis_server.pause()
        try:
            time.sleep(STALL_SECONDS)  # the behaviour under test: the store answers nothing
        finally:
            redis_server.resume()
        before = len(created)
        wait_until(lambda: len(created) >= before + 5, what="tasks created after the stall")
    finally:
        stop.set()
        loader.join(timeout=60)
    assert not loader.is_alive(), "a client hung behind the paused store"
    assert created, "no task was created around the stall"
    assert failures, "nothing failed while the store was paused: the test proved nothing"
    assert_retryable(failures, within=STORE_BOUND)
    assert all(f.status == 503 and "store_unavailable" in f.text for f in failures), failures
    assert {t["task_id"] for t in running}
    check_all(
        process.base_url,
        [Books("default", key)],
        store_url=redis_server.url,
        blobs=tmp_path / "artifacts",
        settle_seconds=60,
    )
