"""Media task creates on a real gateway: idempotent replays, insufficient credits, concurrent
creates and cancels, races with completion, rate limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from tests.e2e.media.support import (
    IMAGES,
    REFERENCE_MUSIC,
    TEXT_TO_MUSIC,
    assert_the_books_close,
)
from tests.e2e.media_support import (
    assert_books_balance,
    ledger,
    post_task,
    task_entries,
    wait_for_task,
    wallet_balance,
)
from tests.support.gateway_process import GatewayProcess, client_for


def test_idempotent_create_is_replayed_and_debited_once(
    api: httpx.Client, other_api: httpx.Client
) -> None:
    before = wallet_balance(api)
    body = {"model": "beta-music-2.6", "prompt": "once only", "metadata": {"k": "v"}}
    first = api.post(TEXT_TO_MUSIC, json=body, headers={"Idempotency-Key": "media-idem-1"})
    assert first.status_code == 202, first.text
    assert "idempotent-replayed" not in first.headers
    second = api.post(TEXT_TO_MUSIC, json=body, headers={"Idempotency-Key": "media-idem-1"})
    assert second.status_code == 202, second.text
    assert second.headers["idempotent-replayed"] == "true"
    task_id = first.json()["task_id"]
    assert second.json()["task_id"] == task_id
    reordered = {"metadata": {"k": "v"}, "prompt": "once only", "model": "beta-music-2.6"}
    third = api.post(TEXT_TO_MUSIC, json=reordered, headers={"Idempotency-Key": "media-idem-1"})
    assert third.status_code == 202
    assert third.json()["task_id"] == task_id
    assert wallet_balance(api) == before - 50

    reused = api.post(
        TEXT_TO_MUSIC,
        json={**body, "prompt": "something else"},
        headers={"Idempotency-Key": "media-idem-1"},
    )
    assert reused.status_code == 422, reused.text
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    # The same key on another path is another scope.
    image = api.post(
        IMAGES, json={"model": "auto", "prompt": "p"}, headers={"Idempotency-Key": "media-idem-1"}
    )
    assert image.status_code == 202, image.text
    assert image.json()["task_id"] != task_id

    # The same key of another tenant is another scope too.
    theirs = other_api.post(TEXT_TO_MUSIC, json=body, headers={"Idempotency-Key": "media-idem-1"})
    assert theirs.status_code == 202, theirs.text
    assert "idempotent-replayed" not in theirs.headers
    assert theirs.json()["task_id"] != task_id
    wait_for_task(other_api, theirs.json()["task_id"])

    task = wait_for_task(api, task_id)
    assert task["status"] == "succeeded"
    wait_for_task(api, image.json()["task_id"])
    assert [e["kind"] for e in task_entries(api, task_id)] == ["debit"]
    listed = api.get("/v1/tasks", params={"limit": "100"}).json()["data"]
    assert sum(1 for t in listed if t["task_id"] == task_id) == 1
    assert wallet_balance(api) == before - 50 - 50


def test_insufficient_credits_is_402_and_creates_nothing(media_gateway: GatewayProcess) -> None:
    media_gateway.grant("poor", "10")
    with client_for(media_gateway, media_gateway.new_key("poor"), timeout=15) as poor:
        assert wallet_balance(poor) == 10
        for path, body in (
            (IMAGES, {"model": "auto", "prompt": "too dear"}),
            (TEXT_TO_MUSIC, {"model": "alpha-5.5", "prompt": "too dear"}),
        ):
            response = poor.post(path, json=body, headers={"Idempotency-Key": f"poor-{path}"})
            assert response.status_code == 402, response.text
            error = response.json()["error"]
            assert error["code"] == "insufficient_credits"
            assert error["request_id"] == response.headers["x-request-id"]
        listed = poor.get("/v1/tasks")
        assert listed.status_code == 200
        assert listed.json()["data"] == []
        assert [(e["kind"], e["amount_credits"]) for e in ledger(poor)] == [("grant", "10.0000")]
        assert wallet_balance(poor) == 10

        # Exactly enough is enough; the wallet lands on zero, never below.
        # The 402 released its Idempotency-Key: the same key runs again, for real.
        media_gateway.grant("poor", "40")
        retried = poor.post(
            IMAGES,
            json={"model": "auto", "prompt": "too dear"},
            headers={"Idempotency-Key": f"poor-{IMAGES}"},
        )
        assert retried.status_code == 202, retried.text
        assert "idempotent-replayed" not in retried.headers
        created = retried.json()
        assert wallet_balance(poor) == 0
        wait_for_task(poor, created["task_id"])
        again = poor.post(TEXT_TO_MUSIC, json={"model": "beta-music-2.6", "prompt": "more"})
        assert again.status_code == 402
        assert len(poor.get("/v1/tasks").json()["data"]) == 1
        assert_books_balance(poor)


def _in_threads(count: int, work: Callable[[int], httpx.Response]) -> list[httpx.Response]:
    results: list[httpx.Response | None] = [None] * count
    barrier = threading.Barrier(count)

    def run(index: int) -> None:
        barrier.wait()
        results[index] = work(index)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def test_concurrent_same_key_creates_make_one_task(
    media_gateway: GatewayProcess, api: httpx.Client
) -> None:
    before = wallet_balance(api)
    body = {"model": "auto", "prompt": "racing key", "n": 2}

    def create(_: int) -> httpx.Response:
        with client_for(media_gateway, media_gateway.api_key or "", timeout=15) as client:
            return client.post(IMAGES, json=body, headers={"Idempotency-Key": "media-race-1"})

    responses = _in_threads(8, create)
    assert {r.status_code for r in responses} <= {202, 409}, [r.text for r in responses]
    accepted = [r for r in responses if r.status_code == 202]
    assert accepted
    assert len({r.json()["task_id"] for r in accepted}) == 1
    for response in responses:
        if response.status_code == 409:
            assert response.json()["error"]["code"] == "idempotency_request_in_progress"
    task_id = accepted[0].json()["task_id"]
    wait_for_task(api, task_id)
    assert [e["kind"] for e in task_entries(api, task_id)] == ["debit"]
    assert wallet_balance(api) == before - 100


def test_concurrent_cancels_refund_once(media_gateway: GatewayProcess, api: httpx.Client) -> None:
    before = wallet_balance(api)
    created = post_task(api, TEXT_TO_MUSIC, {"model": "alpha-5.5", "prompt": "[[sim:stall]]"})
    wait_for_task(api, created["task_id"], statuses=frozenset({"running"}))

    def cancel(_: int) -> httpx.Response:
        with client_for(media_gateway, media_gateway.api_key or "", timeout=15) as client:
            return client.post(f"/v1/tasks/{created['task_id']}/cancel")

    responses = _in_threads(8, cancel)
    assert {r.status_code for r in responses} == {200}
    assert len({r.json()["cancel_requested_at"] for r in responses}) == 1
    task = wait_for_task(api, created["task_id"])
    assert task["status"] == "canceled"
    assert [e["kind"] for e in task_entries(api, created["task_id"])] == ["debit", "refund"]
    assert wallet_balance(api) == before


def test_cancel_racing_completion_settles_one_way(api: httpx.Client) -> None:
    """Cancels that land around the moment tasks finish: each task either succeeded and keeps
    its charge and output, or was canceled with a full refund and no output; never both."""
    before = wallet_balance(api)
    made = [
        post_task(api, IMAGES, {"model": "auto", "prompt": f"edge {i} [[sim:task_ms=400]]"})
        for i in range(8)
    ]
    for index, task in enumerate(made):
        time.sleep(0.02 * index)  # each cancel at another moment of the task's run
        assert api.post(f"/v1/tasks/{task['task_id']}/cancel").status_code == 200
    outcomes = []
    for task in made:
        final = wait_for_task(api, task["task_id"])
        entries = task_entries(api, task["task_id"])
        outcomes.append(final["status"])
        if final["status"] == "succeeded":
            assert len(final["output"]["images"]) == 1
            assert [e["kind"] for e in entries] == ["debit"]
            assert final["billing"]["refunded_credits"] == "0.0000"
        else:
            assert final["status"] == "canceled", final
            assert not final["output"] or not final["output"].get("images")
            assert [e["kind"] for e in entries] == ["debit", "refund"]
            assert final["billing"]["refunded_credits"] == "50.0000"
    kept = outcomes.count("succeeded")
    assert wallet_balance(api) == before - 50 * kept
    assert_books_balance(api)


def test_rate_limited_creates_are_429_and_cost_nothing(media_gateway: GatewayProcess) -> None:
    media_gateway.grant("limited", "1000")
    with client_for(media_gateway, media_gateway.new_key("limited"), timeout=15) as limited:
        statuses = [
            limited.post(IMAGES, json={"model": "auto", "prompt": f"r{i}"}) for i in range(4)
        ]
        codes = [r.status_code for r in statuses]
        assert codes == [202, 202, 202, 429], codes
        refused = statuses[3]
        assert refused.json()["error"]["code"] == "rate_limited"
        assert refused.json()["error"]["retryable"] is True
        assert int(refused.headers["retry-after"]) >= 1
    # The limit is per key: another key of the tenant reads the books.
    with client_for(media_gateway, media_gateway.new_key("limited"), timeout=15) as reader:
        # (Three requests a minute for this key as well: no polling here.)
        assert [e["kind"] for e in ledger(reader)] == ["debit", "debit", "debit", "grant"]
        assert wallet_balance(reader) == 1000 - 150
    # As on every limited response (and on chat's 429): OpenAI's x-ratelimit-* headers.
    assert refused.headers.get("x-ratelimit-limit-requests") == "3", dict(refused.headers)
    assert refused.headers.get("x-ratelimit-remaining-requests") == "0", dict(refused.headers)


def test_reference_audio_url_to_a_private_address_is_refused(api: httpx.Client) -> None:
    before = wallet_balance(api)
    response = api.post(
        REFERENCE_MUSIC,
        json={
            "model": "beta-music-2.6",
            "prompt": "p",
            "reference_audio": {"type": "url", "url": "https://127.0.0.1/hum.wav"},
        },
    )
    if response.status_code == 202:
        task = wait_for_task(api, response.json()["task_id"])
        assert task["status"] == "failed", task
        assert task["error"]["code"] == "validation_error"
    else:
        assert response.status_code == 422, response.text
    assert wallet_balance(api) == before


def test_every_task_ended_and_the_wallet_is_the_sum_of_the_ledger(
    api: httpx.Client, other_api: httpx.Client
) -> None:
    assert_the_books_close(api, other_api)
