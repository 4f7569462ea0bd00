"""Media tasks between tenants and in lists, on a real gateway: another tenant's tasks and
artifacts do not exist; the task list pages newest first and filters."""

from __future__ import annotations

import httpx

from tests.e2e.media.support import (
    IMAGE_TO_IMAGE,
    IMAGES,
    REFERENCE_MUSIC,
    TEXT_TO_MUSIC,
    assert_the_books_close,
)
from tests.e2e.media_support import (
    assert_books_balance,
    post_task,
    wait_for_task,
    wallet_balance,
    wav_bytes,
)
from tests.support.gateway_process import GatewayProcess, client_for


def test_other_tenants_tasks_and_artifacts_do_not_exist(
    media_gateway: GatewayProcess, api: httpx.Client, other_api: httpx.Client
) -> None:
    created = post_task(api, IMAGES, {"model": "auto", "prompt": "mine"})
    task = wait_for_task(api, created["task_id"])
    (image,) = task["output"]["images"]
    upload = api.post("/v1/uploads", files={"file": ("a.wav", wav_bytes(0.5), "audio/wav")})
    assert upload.status_code == 201
    other_before = wallet_balance(other_api)

    for response in (
        other_api.get(f"/v1/tasks/{task['task_id']}"),
        other_api.post(f"/v1/tasks/{task['task_id']}/cancel"),
        other_api.get(f"/v1/artifacts/{image['artifact_id']}"),
        other_api.get(f"/v1/artifacts/{image['artifact_id']}/content"),
        other_api.get(f"/v1/artifacts/{upload.json()['artifact_id']}"),
        other_api.get(f"/v1/artifacts/{upload.json()['artifact_id']}/content"),
    ):
        assert response.status_code == 404, (response.request.url, response.text)
        assert response.json()["error"]["code"] == "not_found"
    listed = other_api.get("/v1/tasks", params={"limit": "100"}).json()["data"]
    assert task["task_id"] not in {t["task_id"] for t in listed}
    # Another key of the same tenant sees it all.
    with client_for(media_gateway, media_gateway.new_key("default"), timeout=15) as same_tenant:
        assert same_tenant.get(f"/v1/tasks/{task['task_id']}").status_code == 200
        assert same_tenant.get(f"/v1/artifacts/{image['artifact_id']}").status_code == 200

    # Another tenant cannot use my artifacts as references either.
    stolen = other_api.post(
        IMAGE_TO_IMAGE,
        json={
            "model": "auto",
            "prompt": "p",
            "image": {"type": "artifact", "artifact_id": image["artifact_id"]},
        },
    )
    assert stolen.status_code == 422, stolen.text
    missing = other_api.post(
        IMAGE_TO_IMAGE,
        json={
            "model": "auto",
            "prompt": "p",
            "image": {"type": "artifact", "artifact_id": "art_" + "0" * 32},
        },
    )
    # Indistinguishable from an artifact that does not exist.
    assert stolen.json()["error"]["details"] == missing.json()["error"]["details"]
    assert stolen.json()["error"]["details"][0]["field"] == "image.artifact_id"
    stolen_audio = other_api.post(
        REFERENCE_MUSIC,
        json={
            "model": "auto",
            "prompt": "p",
            "reference_audio": {"type": "artifact", "artifact_id": upload.json()["artifact_id"]},
        },
    )
    assert stolen_audio.status_code == 422, stolen_audio.text
    assert stolen_audio.json()["error"]["details"][0]["field"] == "reference_audio.artifact_id"
    assert wallet_balance(other_api) == other_before
    # And the owner's task was not touched by the cancel attempt.
    assert api.get(f"/v1/tasks/{task['task_id']}").json()["cancel_requested_at"] is None


def test_task_list_pages_newest_first_and_filters(media_gateway: GatewayProcess) -> None:
    media_gateway.grant("lister", "1000")
    with client_for(media_gateway, media_gateway.new_key("lister"), timeout=15) as lister:
        made = [
            post_task(lister, IMAGES, {"model": "auto", "prompt": "one"}),
            post_task(lister, TEXT_TO_MUSIC, {"model": "beta-music-2.6", "prompt": "two"}),
            post_task(lister, IMAGES, {"model": "auto", "prompt": "three [[sim:fail=502]]"}),
            post_task(lister, IMAGES, {"model": "auto", "prompt": "four", "n": 2}),
        ]
        ids = [t["task_id"] for t in made]
        for task_id in ids:
            wait_for_task(lister, task_id)
        newest_first = list(reversed(ids))

        first = lister.get("/v1/tasks", params={"limit": "3"})
        assert first.status_code == 200, first.text
        page = first.json()
        assert page["object"] == "list"
        assert [t["task_id"] for t in page["data"]] == newest_first[:3]
        assert page["has_more"] is True
        assert page["next_after"] == newest_first[2]
        assert all(t["object"] == "task" for t in page["data"])
        second = lister.get("/v1/tasks", params={"limit": "3", "after": page["next_after"]}).json()
        assert [t["task_id"] for t in second["data"]] == newest_first[3:]
        assert second["has_more"] is False
        everything = lister.get("/v1/tasks").json()
        assert [t["task_id"] for t in everything["data"]] == newest_first
        assert everything["has_more"] is False

        failed = lister.get("/v1/tasks", params={"status": "failed"}).json()
        assert [t["task_id"] for t in failed["data"]] == [ids[2]]
        music = lister.get("/v1/tasks", params={"capability": "text_to_music"}).json()
        assert [t["task_id"] for t in music["data"]] == [ids[1]]
        both = lister.get(
            "/v1/tasks", params={"status": "succeeded", "capability": "text_to_image"}
        ).json()
        assert [t["task_id"] for t in both["data"]] == [ids[3], ids[0]]
        paged = lister.get(
            "/v1/tasks", params={"status": "succeeded", "capability": "text_to_image", "limit": 1}
        ).json()
        assert [t["task_id"] for t in paged["data"]] == [ids[3]]
        assert paged["has_more"] is True
        rest = lister.get(
            "/v1/tasks",
            params={
                "status": "succeeded",
                "capability": "text_to_image",
                "limit": 1,
                "after": paged["next_after"],
            },
        ).json()
        assert [t["task_id"] for t in rest["data"]] == [ids[0]]
        assert rest["has_more"] is False
        none = lister.get("/v1/tasks", params={"status": "canceled"}).json()
        assert none["data"] == [] and none["has_more"] is False

        for params in ({"limit": "0"}, {"limit": "101"}, {"status": "done"}, {"capability": "x"}):
            bad = lister.get("/v1/tasks", params=params)
            assert bad.status_code == 422, (params, bad.text)
            assert bad.json()["error"]["code"] == "validation_error"
        assert_books_balance(lister)


def test_every_task_ended_and_the_wallet_is_the_sum_of_the_ledger(
    api: httpx.Client, other_api: httpx.Client
) -> None:
    assert_the_books_close(api, other_api)
