"""Callbacks at the API in process: `callback: {url}` on a task create (kept, shown, or a 422
naming `callback.url`), `/v1/callbacks` a 404, and the admin endpoints (secret rotation,
redelivery, failed callbacks). Delivery itself: tests/e2e/test_callbacks.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from gateway.admin.token import hash_admin_token, new_admin_token
from tests.api.support import InProcessApp, in_process_app

pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

TOKEN = new_admin_token()
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
IMAGE = "/v1/images/generations"


def _run(tmp_path: Path, scenario: Callable[[InProcessApp], Awaitable[None]]) -> None:
    async def main() -> None:
        async with in_process_app(tmp_path, admin_token_hash=hash_admin_token(TOKEN)) as gateway:
            await scenario(gateway)

    asyncio.run(main())


def _image(url: str) -> dict[str, object]:
    return {"model": "auto", "prompt": "a lighthouse", "callback": {"url": url}}


def test_a_callback_is_kept_with_the_task_and_shown(tmp_path: Path) -> None:
    async def scenario(gateway: InProcessApp) -> None:
        created = await gateway.client.post(
            IMAGE, json=_image("https://hooks.example.com/in"), headers=gateway.auth()
        )
        assert created.status_code == 202, created.text
        task = created.json()
        assert task["callback"] == {
            "url": "https://hooks.example.com/in", "status": "pending", "attempt_count": 0,
            "delivered_at": None, "last_error": None, "next_attempt_at": None,
        }  # fmt: skip
        assert "callback" not in task["input"]
        read = await gateway.client.get(f"/v1/tasks/{task['task_id']}", headers=gateway.auth())
        assert read.json()["callback"] == task["callback"]

    _run(tmp_path, scenario)


def test_callback_urls_that_can_never_be_delivered_to_are_a_422(tmp_path: Path) -> None:
    urls = [
        "ftp://hooks.example.com/in",
        "http://hooks.example.com/in",
        "https://127.0.0.1/in",
        "https://2130706433/in",
        "https://[::ffff:169.254.169.254]/in",
        "https://user:pw@hooks.example.com/in",
        "not a url",
    ]

    async def scenario(gateway: InProcessApp) -> None:
        for url in urls:
            response = await gateway.client.post(IMAGE, json=_image(url), headers=gateway.auth())
            assert response.status_code == 422, (url, response.text)
            error = response.json()["error"]
            assert error["code"] == "validation_error"
            assert [d["field"] for d in error["details"]] == ["callback.url"], (url, error)
        listed = await gateway.client.get("/v1/tasks", headers=gateway.auth())
        assert listed.json()["data"] == []

    _run(tmp_path, scenario)


def test_v1_callbacks_is_not_an_endpoint(tmp_path: Path) -> None:
    async def scenario(gateway: InProcessApp) -> None:
        for method in ("GET", "POST"):
            response = await gateway.client.request(method, "/v1/callbacks", headers=gateway.auth())
            assert response.status_code == 404, response.text
            assert response.json()["error"]["code"] == "not_found"

    _run(tmp_path, scenario)


def test_admin_rotates_secrets_redelivers_and_lists_failed_callbacks(tmp_path: Path) -> None:
    async def scenario(gateway: InProcessApp) -> None:
        client = gateway.client
        first = await client.post("/admin/v1/tenants/default/callback-secret", headers=ADMIN)
        assert first.status_code == 201, first.text
        body = first.json()
        assert (body["object"], body["tenant"]) == ("callback_secret", "default")
        assert body["secret"].startswith("whsec_") and body["created_at"].endswith("Z")
        second = await client.post("/admin/v1/tenants/default/callback-secret", headers=ADMIN)
        assert second.json()["secret"] != body["secret"]
        unknown = await client.post("/admin/v1/tenants/nobody/callback-secret", headers=ADMIN)
        assert unknown.status_code == 404

        created = await client.post(
            IMAGE, json=_image("https://hooks.example.com/in"), headers=gateway.auth()
        )
        task_id = created.json()["task_id"]
        # No worker runs here (workers=0): the task has not ended, its callback is not due.
        early = await client.post(f"/admin/v1/tasks/{task_id}/callback/redeliver", headers=ADMIN)
        assert early.status_code == 422, early.text
        missing = await client.post("/admin/v1/tasks/task_nope/callback/redeliver", headers=ADMIN)
        assert missing.status_code == 404
        failed = await client.get("/admin/v1/callbacks/failed", headers=ADMIN)
        assert failed.json() == {"object": "list", "data": []}
        bad = await client.get("/admin/v1/callbacks/failed?limit=0", headers=ADMIN)
        assert bad.status_code == 422

    _run(tmp_path, scenario)
