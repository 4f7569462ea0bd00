"""Media tasks that fail or come out short, on a real gateway: refunds in full or of the
difference, refused reference addresses, progress while a task runs, creates that race."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from tests.e2e.media.support import (
    IMAGE_TO_IMAGE,
    IMAGES,
    TEXT_TO_MUSIC,
    assert_the_books_close,
    download_png,
)
from tests.e2e.media_support import (
    TERMINAL,
    assert_books_balance,
    data_uri,
    ledger,
    png_bytes,
    post_task,
    task_entries,
    wait_for_task,
    wallet_balance,
)
from tests.support.gateway_process import GatewayProcess, client_for
from tests.support.waiting import wait_until


def test_failed_task_is_refunded_in_full(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "doomed [[sim:fail=502]]", "n": 2})
    # Prepaid at creation (the wallet itself may be refunded already: the task fails at once).
    assert created["billing"]["charged_credits"] == "100.0000"
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "failed", task
    assert task["error"]["code"] == "upstream_error"
    assert task["error"]["message"]
    assert isinstance(task["error"]["retryable"], bool)
    assert not task["output"] or not task["output"].get("images")
    assert task["completed_at"] is not None
    assert task["billing"]["charged_credits"] == "100.0000"
    assert task["billing"]["refunded_credits"] == "100.0000"
    entries = task_entries(api, task["task_id"])
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-100.0000"),
        ("refund", "100.0000"),
    ]
    assert wallet_balance(api) == before
    assert_books_balance(api)


def test_failed_music_task_is_refunded_in_full(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, TEXT_TO_MUSIC, {"model": "alpha-5.5", "prompt": "x [[sim:fail=503]]"})
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "failed", task
    assert task["error"]["code"] == "model_unavailable"
    assert task["error"]["retryable"] is True
    entries = task_entries(api, task["task_id"])
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-80.0000"),
        ("refund", "80.0000"),
    ]
    assert wallet_balance(api) == before


def test_fewer_images_than_asked_refunds_the_difference(api: httpx.Client, root: str) -> None:
    before = wallet_balance(api)
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "sparse [[sim:images=1]]", "n": 3})
    assert created["billing"]["charged_credits"] == "150.0000"
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded", task
    (image,) = task["output"]["images"]
    assert download_png(root, image).size == (512, 512)
    assert task["usage"]["image_count"] == 1
    assert [w["code"] for w in task["warnings"]] == ["fewer_images"]
    assert task["usage"]["credits"] == "50.0000"
    assert task["billing"]["charged_credits"] == "150.0000"
    assert task["billing"]["refunded_credits"] == "100.0000"
    entries = task_entries(api, task["task_id"])
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-150.0000"),
        ("refund", "100.0000"),
    ]
    assert wallet_balance(api) == before - 50
    assert_books_balance(api)


def test_no_images_at_all_fails_with_full_refund(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "none [[sim:images=0]]", "n": 2})
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "failed", task
    assert task["error"]["code"] == "no_output"
    assert task["billing"]["refunded_credits"] == "100.0000"
    entries = task_entries(api, task["task_id"])
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-100.0000"),
        ("refund", "100.0000"),
    ]
    assert wallet_balance(api) == before


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:1/picture.png",
        "https://localhost/picture.png",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/picture.png",
        "https://10.0.0.1/picture.png",
        "https://user:pw@example.com/picture.png",
    ],
)
def test_reference_urls_to_private_addresses_are_refused(api: httpx.Client, url: str) -> None:
    before = wallet_balance(api)
    response = api.post(
        IMAGE_TO_IMAGE,
        json={"model": "auto", "prompt": "p", "image": {"type": "url", "url": url}},
    )
    if response.status_code == 422:
        assert response.json()["error"]["details"][0]["field"].startswith("image")
        assert wallet_balance(api) == before
        return
    assert response.status_code == 202, response.text
    task = wait_for_task(api, response.json()["task_id"])
    assert task["status"] == "failed", task
    assert task["error"]["code"] == "validation_error"
    assert task["error"]["retryable"] is False
    assert "127.0.0.1" not in task["error"]["message"] or "127.0.0.1" in url
    assert task["billing"]["refunded_credits"] == task["billing"]["charged_credits"] == "60.0000"
    assert wallet_balance(api) == before


def test_progress_is_reported_while_a_task_runs(api: httpx.Client) -> None:
    created = post_task(
        api, IMAGES, {"model": "auto", "prompt": "steady [[sim:task_ms=3000]]", "n": 3}
    )
    percents: list[float] = []

    def look() -> dict[str, Any]:
        task: dict[str, Any] = api.get(f"/v1/tasks/{created['task_id']}").json()
        percents.append(task["progress"]["percent"])
        return task

    midway = wait_until(
        look,
        lambda task: task["status"] != "queued" and task["progress"]["percent"] > 0,
        timeout=10,
        what="progress",
    )
    assert midway["status"] == "running", (midway, percents)
    assert 0 < midway["progress"]["percent"] < 100
    assert midway["progress"]["stage"] in {"preparing", "starting", "generating", "encoding"}
    assert isinstance(midway["progress"]["message"], str)
    assert midway["started_at"] is not None and midway["completed_at"] is None
    assert midway["output"] in ({}, None)
    task = wait_until(look, lambda task: task["status"] in TERMINAL, what="the end")
    assert task["status"] == "succeeded"
    assert task["progress"]["percent"] == 100
    assert len(task["output"]["images"]) == 3
    assert percents == sorted(percents), f"progress went backwards: {percents}"
    assert len(set(percents)) >= 3, percents


def test_progress_never_goes_backwards_while_references_are_read(api: httpx.Client) -> None:
    """Reading 16 big references keeps the task in its first stage long enough to be seen."""
    reference = {"type": "data_uri", "data_uri": data_uri(png_bytes(2000, 2000, (5, 5, 5)))}
    created = post_task(
        api,
        IMAGE_TO_IMAGE,
        {
            "model": "auto",
            "prompt": "p [[sim:task_ms=1500]]",
            "image": reference,
            "extra_images": [reference] * 15,
        },
    )
    seen: list[tuple[str, float]] = []

    def look() -> dict[str, Any]:
        task: dict[str, Any] = api.get(f"/v1/tasks/{created['task_id']}").json()
        seen.append((task["progress"]["stage"], task["progress"]["percent"]))
        return task

    task = wait_until(look, lambda task: task["status"] in TERMINAL, what="the end")
    assert task["status"] == "succeeded", task
    changes = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    percents = [percent for _, percent in seen]
    assert percents == sorted(percents), f"progress went backwards: {changes[:6]}"


def test_concurrent_creates_never_overdraw(media_gateway: GatewayProcess) -> None:
    media_gateway.grant("racer", "120")
    with client_for(media_gateway, media_gateway.new_key("racer"), timeout=15) as racer:
        statuses: list[int] = []
        lock = threading.Lock()

        def create() -> None:
            response = racer.post(IMAGES, json={"model": "auto", "prompt": "race"})
            with lock:
                statuses.append(response.status_code)

        threads = [threading.Thread(target=create) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(statuses) == [202, 202] + [402] * 8
        assert wallet_balance(racer) == 20
        tasks = racer.get("/v1/tasks").json()["data"]
        assert len(tasks) == 2
        for task in tasks:
            assert wait_for_task(racer, task["task_id"])["status"] == "succeeded"
        assert [e["kind"] for e in ledger(racer)] == ["debit", "debit", "grant"]
        assert_books_balance(racer)


def test_every_task_ended_and_the_wallet_is_the_sum_of_the_ledger(
    api: httpx.Client, other_api: httpx.Client
) -> None:
    assert_the_books_close(api, other_api)
