"""`/metrics` as Prometheus meets it: values after a mixed workload, read with prometheus-client's
own parser; a real Prometheus server scraping a gateway; a gateway and a `gateway worker`
sharing one multiprocess folder, summed in one scrape."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.e2e.media_support import png_bytes, post_task, root_of, wait_for_task
from tests.support import preloaded
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.metrics_scrape import scrape, total, value
from tests.support.ports import free_port
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.waiting import wait_until

CHAT = "/v1/chat/completions"


def chat_body(content: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "sim-chat-1", "messages": [{"role": "user", "content": content}], **extra}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    process = start_gateway(tmp_path_factory.mktemp("metrics"), MEDIA_CONFIG)
    yield process
    process.stop()


def test_values_after_a_mixed_workload(gateway: GatewayProcess) -> None:
    key = gateway.api_key
    assert key
    limited = gateway.new_key("limited")
    gateway.grant("limited", "100")
    root = root_of(gateway.base_url)
    usage: list[dict[str, Any]] = []
    with (
        httpx.Client(base_url=root, headers={"Authorization": f"Bearer {key}"}, timeout=30) as c,
        httpx.Client(base_url=root, headers={"Authorization": f"Bearer {limited}"}) as lim,
    ):
        # Chat: two calls, one of them replayed once.
        first = c.post(CHAT, json=chat_body(), headers={"Idempotency-Key": "metrics-1"})
        assert first.status_code == 200, first.text
        usage.append(first.json()["usage"])
        replay = c.post(CHAT, json=chat_body(), headers={"Idempotency-Key": "metrics-1"})
        assert replay.status_code == 200 and replay.json() == first.json()
        second = c.post(CHAT, json=chat_body("again"))
        usage.append(second.json()["usage"])
        # A stream, with its usage chunk.
        with c.stream(
            "POST", CHAT, json=chat_body(stream=True, stream_options={"include_usage": True})
        ) as stream:
            assert stream.status_code == 200
            events = [line for line in stream.iter_lines() if line.startswith("data: {")]
        usage.append(json.loads(events[-1][6:])["usage"])
        deltas = [c["delta"] for e in events for c in json.loads(e[6:])["choices"]]
        content_chunks = sum(1 for delta in deltas if delta.get("content"))
        # An upstream that fails.
        failed = c.post(CHAT, json=chat_body("[[sim:fail=503]] no"))
        assert failed.status_code >= 500, failed.text
        # A tenant of 3 requests per minute: the fourth is refused.
        answers = [lim.post(CHAT, json=chat_body(f"n{i}")) for i in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        usage += [a.json()["usage"] for a in answers[:3]]
        # An image task, to its end.
        task = post_task(c, "/v1/images/generations", {"model": "auto", "prompt": "a lighthouse"})
        done = wait_for_task(c, task["task_id"])
        assert done["status"] == "succeeded", done
        # An upload.
        png = png_bytes(8, 8, (200, 10, 10))
        up = c.post("/v1/uploads", files={"file": ("red.png", png, "image/png")})
        assert up.status_code in (200, 201), up.text
        health = c.get("/v1/health").json()

    text, s = scrape(gateway)
    ok = {"route": CHAT, "method": "POST", "status": "200", "model": "sim-chat-1"}
    # 2 calls + 1 replay + 1 stream of the default tenant, 3 of the limited one.
    assert value(s, "gateway_requests_total", **ok) == 7
    assert value(s, "gateway_requests_total", **{**ok, "status": "429"}) == 1
    assert total(s, "gateway_requests_total", route=CHAT, status=str(failed.status_code)) == 1
    assert value(s, "gateway_rate_limited_total", route=CHAT) == 1
    assert value(s, "gateway_idempotency_total", route=CHAT, outcome="replay") == 1
    chat_requests = total(s, "gateway_requests_total", route=CHAT)
    assert chat_requests == 9
    assert value(s, "gateway_request_duration_seconds_count", route=CHAT, method="POST") == 9
    assert value(s, "gateway_overhead_seconds_count", route=CHAT) == 9
    # Upstream: six calls answered (the replay and the 429 never reached it), one failed.
    upstream = {"provider": "sim", "model": "sim-chat-1", "capability": "chat"}
    failures = total(s, "gateway_upstream_errors_total", **upstream, reason="503")
    assert failures >= 1
    assert value(s, "gateway_upstream_request_seconds_count", **upstream) == 6 + failures
    # Streams: one, and its chunks.
    assert value(s, "gateway_stream_first_token_seconds_count", model="sim-chat-1") == 1
    assert value(s, "gateway_stream_chunks_count", model="sim-chat-1") == 1
    assert value(s, "gateway_stream_chunks_sum", model="sim-chat-1") == content_chunks
    # Tokens and credits: exactly what the answers reported, the replay not counted twice.
    prompt = sum(u["prompt_tokens"] for u in usage)
    completion = sum(u["completion_tokens"] for u in usage)
    assert value(s, "gateway_tokens_total", model="sim-chat-1", direction="in") == prompt
    assert value(s, "gateway_tokens_total", model="sim-chat-1", direction="out") == completion
    charged_chat = Decimal(
        str(value(s, "gateway_credits_charged_total", capability="chat", model="sim-chat-1"))
    )
    expected = sum(Decimal(u["credits"]) for u in usage)
    assert abs(charged_chat - expected) < Decimal("0.0001")
    # The image task: created, debited, finished, its output stored.
    image = {"capability": "text_to_image", "model": "image-model-2"}
    assert value(s, "gateway_tasks_created_total", **image) == 1
    assert value(s, "gateway_tasks_finished_total", **image, status="succeeded") == 1
    assert value(s, "gateway_credits_charged_total", **image) == 50
    assert (
        value(
            s, "gateway_task_duration_seconds_count", capability="text_to_image", status="succeeded"
        )
        == 1
    )
    assert value(s, "gateway_artifacts_total", source="output") == 1
    assert value(s, "gateway_artifact_bytes_total", source="output") > 0
    assert value(s, "gateway_artifacts_total", source="upload") == 1
    assert value(s, "gateway_artifact_bytes_total", source="upload") == len(png)
    # Live facts.
    assert value(s, "gateway_config_info", version=health["config_version"]) == 1
    assert value(s, "gateway_circuit_breaker_state", provider="sim", state="closed") == 1
    assert value(s, "gateway_store_up") == 1
    assert value(s, "gateway_task_queue_depth") == 0
    # Bounded labels: no key, no request id, no task id, no path with an id in it.
    for secret in (key, limited, task["task_id"], first.headers["x-request-id"], "default"):
        assert secret not in text


def test_labels_stay_bounded_for_unknown_paths(gateway: GatewayProcess) -> None:
    root = root_of(gateway.base_url)
    for i in range(20):
        assert httpx.get(f"{root}/nowhere/{i}").status_code == 404
    text, s = scrape(gateway)
    assert "/nowhere" not in text
    assert (
        value(s, "gateway_requests_total", route="unmatched", method="GET", status="404", model="")
        >= 20
    )
    # A task id in the path is one route template, whatever the id.
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    for i in range(3):
        assert httpx.get(f"{root}/v1/tasks/task_{i}", headers=headers).status_code == 404
    _, s = scrape(gateway)
    assert (
        value(
            s,
            "gateway_requests_total",
            route="/v1/tasks/{task_id}",
            method="GET",
            status="404",
            model="",
        )
        == 3
    )


def test_metrics_off(tmp_path: Path) -> None:
    process = start_gateway(tmp_path, MEDIA_CONFIG, extra_env={"GATEWAY_METRICS": "off"})
    try:
        response = httpx.get(f"{root_of(process.base_url)}/metrics")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    finally:
        process.stop()


def _prometheus_binary() -> str:
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the prometheus binary is missing (Debian package prometheus)")
        pytest.skip("the prometheus binary is missing (Debian package prometheus)")
    return binary


def test_a_real_prometheus_scrapes_the_gateway(gateway: GatewayProcess, tmp_path: Path) -> None:
    binary = _prometheus_binary()
    target = root_of(gateway.base_url).removeprefix("http://")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: gateway\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    prometheus = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        headers = {"Authorization": f"Bearer {gateway.api_key}"}
        root = root_of(gateway.base_url)
        for _ in range(3):
            response = httpx.post(f"{root}{CHAT}", json=chat_body(), headers=headers)
            assert response.status_code == 200
        _, s = scrape(gateway)
        expected = total(s, "gateway_requests_total", route=CHAT)
        assert expected >= 3
        query = f'sum(gateway_requests_total{{route="{CHAT}"}})'

        def ask() -> dict[str, Any]:
            try:
                reply = httpx.get(
                    f"http://127.0.0.1:{port}/api/v1/query", params={"query": query}, timeout=2
                )
            except httpx.HTTPError:
                return {}
            if reply.status_code != 200:  # 503 "Service Unavailable" (text) until it is ready
                return {"not ready": reply.status_code}
            result: dict[str, Any] = reply.json()
            return result

        def seen(answer: dict[str, Any]) -> bool:
            results = answer.get("data", {}).get("result", [])
            return bool(results) and float(results[0]["value"][1]) == expected

        answer = wait_until(ask, seen, timeout=30, what="Prometheus to scrape the gateway")
        assert answer["status"] == "success"
        up = httpx.get(f"http://127.0.0.1:{port}/api/v1/query", params={"query": "up"}).json()
        assert up["data"]["result"][0]["value"][1] == "1"
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=10)
        log.close()


def test_gateway_and_worker_processes_sum_in_one_scrape(redis_url: str, tmp_path: Path) -> None:
    """`gateway serve` with no in-process workers and a `gateway worker` on one Redis share a
    PROMETHEUS_MULTIPROC_DIR: the task the worker ran shows in the gateway's scrape."""
    shared = f"{redis_url.rsplit('/', 1)[0]}/5"
    with redis.Redis.from_url(shared) as connection:
        connection.flushdb()
    folder = tmp_path / "prom"
    folder.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(folder), "GATEWAY_WORKERS": "0"}
    gateway = start_gateway(tmp_path / "gw", MEDIA_CONFIG, store_url=shared, extra_env=env)
    worker: preloaded.Process | None = None
    worker_log = (tmp_path / "worker.log").open("wb")
    try:
        key = gateway.new_key("default")
        gateway.grant("default", "500")
        worker_env = {**gateway.env, **env, "GATEWAY_WORKERS": "2"}
        worker = preloaded.spawn(
            ["worker"],
            env=worker_env,
            stdout=worker_log,
            stderr=subprocess.STDOUT,
        )
        with httpx.Client(
            base_url=root_of(gateway.base_url), headers={"Authorization": f"Bearer {key}"}
        ) as c:
            task = post_task(c, "/v1/images/generations", {"model": "auto", "prompt": "a boat"})
            done = wait_for_task(c, task["task_id"], timeout=30)
            assert done["status"] == "succeeded", done
        # One file per process and kind: the gateway's and the worker's.
        pids = {p.name.rsplit("_", 1)[-1].removesuffix(".db") for p in folder.glob("*.db")}
        assert str(worker.pid) in pids and len(pids) >= 2, pids
        _, s = scrape(gateway)
        image = {"capability": "text_to_image", "model": "image-model-2"}
        assert value(s, "gateway_tasks_created_total", **image) == 1  # counted by the gateway
        assert value(s, "gateway_tasks_finished_total", **image, status="succeeded") == 1
        assert value(s, "gateway_artifacts_total", source="output") == 1  # by the worker
        assert (
            value(
                s,
                "gateway_requests_total",
                route="/v1/images/generations",
                method="POST",
                status="202",
                model="image-model-2",
            )
            == 1
        )
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=10)
        worker_log.close()
        gateway.stop()
