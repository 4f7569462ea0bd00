"""Media tasks and the processes that run them: no worker, a later worker, a killed gateway's
task taken over after its lease, workers that keep dying, replicas that split the work."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.media.support import (
    IMAGES,
    REFERENCE_MUSIC,
    TEXT_TO_MUSIC,
    download_png,
    redis_db,
    start_media_gateway,
)
from tests.e2e.media_support import (
    assert_books_balance,
    fetch_unsigned,
    post_task,
    root_of,
    task_entries,
    wait_for_task,
    wallet_balance,
    wav_bytes,
)
from tests.support.gateway_process import client_for, start_gateway
from tests.support.routing_files import MEDIA_CONFIG


def test_queued_task_cancel_and_a_later_worker(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """With no worker the task stays queued: cancel ends it at once; a later worker runs the
    tasks that are still queued and leaves the canceled one alone."""
    store_url = redis_db(request, 12) if store_kind == "redis" else None
    idle = start_media_gateway(tmp_path, store_url, {"GATEWAY_WORKERS": "0"})
    try:
        with client_for(idle, idle.api_key or "", timeout=15) as client:
            before = wallet_balance(client)
            doomed = post_task(client, IMAGES, {"model": "auto", "prompt": "q", "n": 2})
            kept = post_task(client, TEXT_TO_MUSIC, {"model": "beta-music-2.6", "prompt": "k"})
            time.sleep(0.5)  # the behaviour under test: with no worker, it stays queued
            queued = client.get(f"/v1/tasks/{doomed['task_id']}").json()
            assert queued["status"] == "queued"
            assert queued["started_at"] is None
            listed = client.get("/v1/tasks", params={"status": "queued"}).json()["data"]
            assert {t["task_id"] for t in listed} == {doomed["task_id"], kept["task_id"]}
            assert wallet_balance(client) == before - 100 - 50

            response = client.post(f"/v1/tasks/{doomed['task_id']}/cancel")
            assert response.status_code == 200, response.text
            canceled = response.json()
            assert canceled["status"] == "canceled"
            assert canceled["started_at"] is None
            assert canceled["completed_at"] is not None
            assert canceled["cancel_requested_at"] is not None
            assert canceled["billing"]["refunded_credits"] == "100.0000"
            assert wallet_balance(client) == before - 50
            again = client.post(f"/v1/tasks/{doomed['task_id']}/cancel").json()
            assert again["status"] == "canceled"
            assert again["completed_at"] == canceled["completed_at"]
            assert [e["kind"] for e in task_entries(client, doomed["task_id"])] == [
                "debit",
                "refund",
            ]
    finally:
        idle.stop()

    busy = start_gateway(tmp_path, MEDIA_CONFIG, store_url=store_url)
    busy.api_key = idle.api_key
    try:
        with client_for(busy, busy.api_key or "", timeout=15) as client:
            done = wait_for_task(client, kept["task_id"])
            assert done["status"] == "succeeded", done
            assert len(done["output"]["clips"]) == 1
            assert client.get(f"/v1/tasks/{doomed['task_id']}").json()["status"] == "canceled"
            assert wallet_balance(client) == before - 50
            assert [e["kind"] for e in task_entries(client, kept["task_id"])] == ["debit"]
            assert_books_balance(client)
    finally:
        busy.stop()


def test_a_killed_gateways_task_is_taken_over_after_its_lease(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store_url = redis_db(request, 13) if store_kind == "redis" else None
    first = start_media_gateway(tmp_path, store_url)
    try:
        with client_for(first, first.api_key or "", timeout=15) as client:
            quick = post_task(client, IMAGES, {"model": "auto", "prompt": "kept"})
            kept_url = wait_for_task(client, quick["task_id"])["output"]["images"][0]["url"]
            before = wallet_balance(client)
            created = post_task(
                client, IMAGES, {"model": "auto", "prompt": "survivor [[sim:task_ms=2500]]"}
            )
            wait_for_task(client, created["task_id"], statuses=frozenset({"running"}))
    finally:
        first.process.kill()
        first.process.wait(timeout=10)
    second = start_gateway(tmp_path, MEDIA_CONFIG, store_url=store_url)
    second.api_key = first.api_key
    try:
        with client_for(second, second.api_key or "", timeout=15) as client:
            task = wait_for_task(client, created["task_id"], timeout=30)
            assert task["status"] == "succeeded", task
            (image,) = task["output"]["images"]
            assert download_png(root_of(second.base_url), image).size == (512, 512)
            # A URL handed out before the restart still opens its artifact.
            assert fetch_unsigned(root_of(second.base_url), kept_url).status_code == 200
            assert [e["kind"] for e in task_entries(client, task["task_id"])] == ["debit"]
            assert wallet_balance(client) == before - 50
            assert_books_balance(client)
    finally:
        second.stop()


def test_a_task_whose_workers_keep_dying_fails_once_with_a_full_refund(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A stalled task outlives gateway after gateway (killed, lease expires, claimed again) until
    its claims run out: then it fails, refunded exactly once; it never stays running."""
    store_url = redis_db(request, 15) if store_kind == "redis" else None
    gateway = start_media_gateway(tmp_path, store_url)
    key = gateway.api_key or ""
    with client_for(gateway, key, timeout=15) as client:
        before = wallet_balance(client)
        created = post_task(client, IMAGES, {"model": "auto", "prompt": "[[sim:stall]]", "n": 2})
        wait_for_task(client, created["task_id"], statuses=frozenset({"running"}))
    final: dict[str, Any] | None = None
    for _ in range(6):
        gateway.process.kill()
        gateway.process.wait(timeout=10)
        gateway = start_gateway(tmp_path, MEDIA_CONFIG, store_url=store_url)
        with client_for(gateway, key, timeout=15) as client:
            try:
                final = wait_for_task(client, created["task_id"], timeout=6)
                break
            except AssertionError:
                continue
    try:
        assert final is not None, "the task never ended"
        assert final["status"] == "failed", final
        assert final["error"]["code"]
        with client_for(gateway, key, timeout=15) as client:
            entries = task_entries(client, created["task_id"])
            assert [(e["kind"], e["amount_credits"]) for e in entries] == [
                ("debit", "-100.0000"),
                ("refund", "100.0000"),
            ]
            assert wallet_balance(client) == before
            assert_books_balance(client)
    finally:
        gateway.stop()


def test_redis_replicas_one_takes_creates_the_other_runs_them(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two replicas on one Redis with a shared artifact folder and signing secret: tasks made
    on the one without workers run on the other; URLs signed by one open on the other."""
    shared = redis_db(request, 14)
    env = {
        "GATEWAY_ARTIFACTS_DIR": str(tmp_path / "artifacts"),
        "GATEWAY_SIGNING_SECRET": "media-e2e-shared-signing-secret-0123456789",
    }
    front = start_media_gateway(tmp_path / "front", shared, {**env, "GATEWAY_WORKERS": "0"})
    try:
        back = start_gateway(tmp_path / "back", MEDIA_CONFIG, store_url=shared, extra_env=env)
        try:
            with (
                client_for(front, front.api_key or "", timeout=15) as at_front,
                client_for(back, front.api_key or "", timeout=15) as at_back,
            ):
                before = wallet_balance(at_front)
                upload = at_front.post(
                    "/v1/uploads", files={"file": ("r.wav", wav_bytes(1.5), "audio/wav")}
                )
                assert upload.status_code == 201, upload.text
                reference = {"type": "artifact", "artifact_id": upload.json()["artifact_id"]}
                music = post_task(
                    at_front,
                    REFERENCE_MUSIC,
                    {"model": "alpha-5.5", "prompt": "r", "reference_audio": reference},
                )
                image = post_task(at_front, IMAGES, {"model": "auto", "prompt": "i", "n": 2})
                stalled = post_task(at_front, IMAGES, {"model": "auto", "prompt": "[[sim:stall]]"})
                done = wait_for_task(at_front, music["task_id"])
                assert done["status"] == "succeeded", done
                assert [c["duration_seconds"] for c in done["output"]["clips"]] == [1.5, 1.5]
                for clip in done["output"]["clips"]:
                    assert (
                        fetch_unsigned(root_of(back.base_url), clip["audio_url"]).status_code == 200
                    )
                pictures = wait_for_task(at_back, image["task_id"])
                assert pictures["status"] == "succeeded"
                for picture in pictures["output"]["images"]:
                    assert download_png(root_of(front.base_url), picture).size == (512, 512)
                # Cancel on the front reaches the worker on the back.
                wait_for_task(at_front, stalled["task_id"], statuses=frozenset({"running"}))
                assert at_front.post(f"/v1/tasks/{stalled['task_id']}/cancel").status_code == 200
                canceled = wait_for_task(at_back, stalled["task_id"])
                assert canceled["status"] == "canceled"
                assert wallet_balance(at_back) == before - 80 - 100
                assert_books_balance(at_back)
        finally:
            back.stop()
    finally:
        front.stop()
