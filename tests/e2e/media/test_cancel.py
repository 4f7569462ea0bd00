"""Cancelling media tasks on a real gateway: right after create, while running, after the end;
refunds at most once."""

from __future__ import annotations

import httpx

from tests.e2e.media.support import IMAGES, TEXT_TO_MUSIC, assert_the_books_close
from tests.e2e.media_support import (
    assert_books_balance,
    parse_time,
    post_task,
    task_entries,
    wait_for_task,
    wallet_balance,
)


def test_cancel_right_after_create_is_refunded_in_full(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(
        api, IMAGES, {"model": "auto", "prompt": "slow [[sim:task_ms=8000]]", "n": 2}
    )
    response = api.post(f"/v1/tasks/{created['task_id']}/cancel")
    assert response.status_code == 200, response.text
    canceling = response.json()
    assert canceling["task_id"] == created["task_id"]
    assert canceling["cancel_requested_at"] is not None
    assert canceling["status"] in {"canceled", "running"}, canceling
    task = wait_for_task(api, created["task_id"], timeout=6)
    assert task["status"] == "canceled", task
    assert task["completed_at"] is not None
    assert task["error"] is None or task["error"]["code"]
    assert not task["output"] or not task["output"].get("images")
    assert task["billing"]["refunded_credits"] == "100.0000"
    entries = task_entries(api, task["task_id"])
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-100.0000"),
        ("refund", "100.0000"),
    ]
    assert wallet_balance(api) == before


def test_cancel_a_running_stalled_task(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, TEXT_TO_MUSIC, {"model": "alpha-5.5", "prompt": "[[sim:stall]] x"})
    task_id = created["task_id"]
    running = wait_for_task(api, task_id, statuses=frozenset({"running"}), timeout=10)
    assert running["started_at"] is not None
    assert running["cancel_requested_at"] is None
    listed = api.get("/v1/tasks", params={"status": "running", "limit": "100"}).json()["data"]
    assert task_id in {t["task_id"] for t in listed}
    response = api.post(f"/v1/tasks/{task_id}/cancel")
    assert response.status_code == 200, response.text
    requested = response.json()
    assert requested["cancel_requested_at"] is not None
    assert requested["status"] in {"running", "canceled"}
    task = wait_for_task(api, task_id, timeout=10)
    assert task["status"] == "canceled", task
    assert task["cancel_requested_at"] == requested["cancel_requested_at"]
    assert parse_time(task["cancel_requested_at"]) <= parse_time(task["completed_at"])
    assert task["billing"]["charged_credits"] == "80.0000"
    assert task["billing"]["refunded_credits"] == "80.0000"
    assert wallet_balance(api) == before

    again = api.post(f"/v1/tasks/{task_id}/cancel")
    assert again.status_code == 200
    assert again.json()["status"] == "canceled"
    assert again.json()["completed_at"] == task["completed_at"]
    assert again.json()["cancel_requested_at"] == task["cancel_requested_at"]
    assert again.json()["billing"] == task["billing"]
    entries = task_entries(api, task_id)
    assert [(e["kind"], e["amount_credits"]) for e in entries] == [
        ("debit", "-80.0000"),
        ("refund", "80.0000"),
    ]
    assert wallet_balance(api) == before
    assert_books_balance(api)


def test_cancel_a_running_image_task_refunds_every_image(api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "[[sim:stall]]", "n": 3})
    wait_for_task(api, created["task_id"], statuses=frozenset({"running"}))
    assert api.post(f"/v1/tasks/{created['task_id']}/cancel").status_code == 200
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "canceled"
    assert task["billing"]["refunded_credits"] == task["billing"]["charged_credits"] == "150.0000"
    assert task["usage"]["credits"] == "0.0000"
    assert wallet_balance(api) == before


def test_cancel_a_finished_task_changes_nothing(api: httpx.Client) -> None:
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "done soon"})
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "succeeded"
    balance = wallet_balance(api)
    response = api.post(f"/v1/tasks/{task['task_id']}/cancel")
    assert response.status_code == 200
    unchanged = response.json()
    assert unchanged["status"] == "succeeded"
    assert unchanged["cancel_requested_at"] is None
    assert {k: v for k, v in unchanged["output"].items() if k != "images"} == {
        k: v for k, v in task["output"].items() if k != "images"
    }
    assert [i["artifact_id"] for i in unchanged["output"]["images"]] == [
        i["artifact_id"] for i in task["output"]["images"]
    ]
    assert unchanged["billing"] == task["billing"]
    assert [e["kind"] for e in task_entries(api, task["task_id"])] == ["debit"]
    assert wallet_balance(api) == balance


def test_unknown_task_is_404(api: httpx.Client) -> None:
    for response in (
        api.get("/v1/tasks/task_doesnotexist00000000000000"),
        api.post("/v1/tasks/task_doesnotexist00000000000000/cancel"),
    ):
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "not_found"


def test_every_task_ended_and_the_wallet_is_the_sum_of_the_ledger(
    api: httpx.Client, other_api: httpx.Client
) -> None:
    assert_the_books_close(api, other_api)
