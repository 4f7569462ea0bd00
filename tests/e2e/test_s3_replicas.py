"""Two `gateway serve` replicas on one Redis and one S3 bucket (moto, a real server process)
share artifacts without sharing a disk: a task created on one runs on the other and its output
downloads from the first; an upload to either is readable from both.

Each replica has its own data folder, so any byte that crosses over went through S3.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.media_support import (
    assert_books_balance,
    fetch_unsigned,
    post_task,
    root_of,
    wait_for_task,
    wav_bytes,
)
from tests.support import preloaded
from tests.support.gateway_process import client_for, start_gateway
from tests.support.redis_server import RedisServer
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.s3_server import S3Server, s3_server_or_skip

MiB = 1024 * 1024
SECRET = "replicas-share-this-secret"


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[S3Server]:
    with s3_server_or_skip(tmp_path / "s3") as server:
        yield server


@pytest.fixture
def redis_url(redis_binary: str, tmp_path: Path) -> Iterator[str]:
    server = RedisServer(redis_binary, tmp_path / "redis")
    server.workdir.mkdir()
    server.start()
    yield server.url
    server.stop()


def _artifact_files(workdir: Path) -> list[Path]:
    return [p for p in (workdir / "data").rglob("*") if p.is_file() and "art_" in p.name]


def test_replicas_share_artifacts_through_one_bucket(
    s3: S3Server, redis_url: str, tmp_path: Path
) -> None:
    bucket = s3.create_bucket()
    shared = {
        "GATEWAY_ARTIFACTS_URL": s3.artifacts_url(bucket, "gw"),
        "GATEWAY_SIGNING_SECRET": SECRET,
    }
    front = start_gateway(
        tmp_path / "front",
        MEDIA_CONFIG,
        store_url=redis_url,
        extra_env={**shared, "GATEWAY_WORKERS": "0"},
    )
    back = None
    try:
        back = start_gateway(tmp_path / "back", MEDIA_CONFIG, store_url=redis_url, extra_env=shared)
        key = front.new_key("default")
        front.grant("default", "5000")
        with client_for(front, key) as at_front, client_for(back, key) as at_back:
            # A task accepted by the worker-less front runs on back; front serves its output.
            body = {"model": "image-model-2", "prompt": "two replicas", "aspect_ratio": "4:3"}
            task_id = post_task(at_front, "/v1/images/generations", body)["task_id"]
            task = wait_for_task(at_front, task_id)
            assert task["status"] == "succeeded", task
            image = task["output"]["images"][0]
            signed = fetch_unsigned(root_of(front.base_url), image["url"])
            assert signed.status_code == 200, signed.text
            assert signed.content.startswith(b"\x89PNG")
            assert (image["width"], image["height"]) == (512, 384)
            assert fetch_unsigned(root_of(back.base_url), image["url"]).content == signed.content

            # Uploads both ways; the large one streams to S3 as a multipart upload.
            small = wav_bytes(0.5)
            large = wav_bytes(0.5) + bytes(12 * MiB)
            for source, reader, audio in ((at_back, at_front, large), (at_front, at_back, small)):
                response = source.post(
                    "/v1/uploads", files={"file": ("a.wav", audio, "audio/wav")}, timeout=120
                )
                assert response.status_code == 201, response.text
                upload = response.json()
                assert upload["sha256"] == hashlib.sha256(audio).hexdigest()
                content = reader.get(f"/v1/artifacts/{upload['artifact_id']}/content")
                assert content.status_code == 200, content.text
                assert content.content == audio
            assert_books_balance(at_front)

        stored = s3.keys(bucket)
        assert len(stored) == 3 and all(k.startswith("gw/") for k in stored), stored
        assert any(s3.etag(bucket, k).endswith("-2") for k in stored)  # 8 MiB + the rest
        assert _artifact_files(tmp_path / "front") == []
        assert _artifact_files(tmp_path / "back") == []
    finally:
        if back is not None:
            back.stop()
        front.stop()


def test_a_separate_worker_process_writes_outputs_to_the_bucket(
    s3: S3Server, redis_url: str, tmp_path: Path
) -> None:
    """`gateway worker` opens the same blob store as `serve` (and closes it on SIGTERM)."""
    bucket = s3.create_bucket()
    env = {"GATEWAY_ARTIFACTS_URL": s3.artifacts_url(bucket), "GATEWAY_WORKERS": "0"}
    gateway = start_gateway(tmp_path / "gw", MEDIA_CONFIG, store_url=redis_url, extra_env=env)
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = preloaded.spawn(
            ["worker", "--concurrency", "2"],
            env=gateway.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        key = gateway.new_key("default")
        gateway.grant("default", "5000")
        with client_for(gateway, key) as client:
            body = {"model": "image-model-2", "prompt": "from a worker"}
            task = wait_for_task(
                client, post_task(client, "/v1/images/generations", body)["task_id"]
            )
            assert task["status"] == "succeeded", (task, log.read_text())
            url = task["output"]["images"][0]["url"]
            assert fetch_unsigned(root_of(gateway.base_url), url).content.startswith(b"\x89PNG")
        assert len(s3.keys(bucket)) == 1
        worker.terminate()
        assert worker.wait(timeout=30) == 0, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        gateway.stop()


def test_a_missing_bucket_stops_start_up_with_its_name(
    s3: S3Server, redis_url: str, tmp_path: Path
) -> None:
    env = {"GATEWAY_ARTIFACTS_URL": s3.artifacts_url("no-such-bucket")}
    with pytest.raises(AssertionError) as caught:
        start_gateway(tmp_path / "gw", MEDIA_CONFIG, store_url=redis_url, extra_env=env).stop()
    assert "'no-such-bucket'" in str(caught.value)
    assert "does not exist" in str(caught.value)
