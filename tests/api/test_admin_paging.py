"""/admin/v1's lists in pages: tenants, keys and usage rows, `limit` items after `after`
(the previous page's `next_after`), in the order of the whole list, on the embedded store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.admin.token import hash_admin_token, new_admin_token
from tests.api.support import InProcessApp, in_process_app

pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

TOKEN = new_admin_token()
ADMIN = {"Authorization": f"Bearer {TOKEN}"}


def _run(tmp_path: Path, scenario: Any) -> None:
    async def main() -> None:
        async with in_process_app(tmp_path, admin_token_hash=hash_admin_token(TOKEN)) as gw:
            await scenario(gw)

    asyncio.run(main())


async def _list(gw: InProcessApp, path: str, **params: str) -> dict[str, Any]:
    response = await gw.client.get(f"/admin/v1{path}", params=params, headers=ADMIN)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _all_pages(gw: InProcessApp, path: str, limit: int, **query: str) -> list[list[Any]]:
    """Every page of a list, following `next_after` until `has_more` is false."""
    pages: list[list[Any]] = []
    params = {"limit": str(limit), **query}
    while True:
        body = await _list(gw, path, **params)
        pages.append(body["data"])
        if not body["has_more"]:
            assert body["next_after"] is None
            return pages
        params["after"] = body["next_after"]


def test_keys_page_in_the_order_of_the_whole_list(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        for _ in range(4):
            created = await gw.client.post(
                "/admin/v1/keys", json={"tenant": "default"}, headers=ADMIN
            )
            assert created.status_code == 201, created.text
        whole = await _list(gw, "/keys")
        assert (whole["has_more"], whole["next_after"]) == (False, None)
        assert len(whole["data"]) == 6  # the two keys in_process_app made, and four more
        pages = await _all_pages(gw, "/keys", 4)
        assert [len(page) for page in pages] == [4, 2]
        assert [key["id"] for page in pages for key in page] == [k["id"] for k in whole["data"]]
        first = await _list(gw, "/keys", limit="4")
        assert first["next_after"] == first["data"][-1]["id"]
        one_tenant = await _all_pages(gw, "/keys", 1, tenant="limited")
        assert [[key["tenant"] for key in page] for page in one_tenant] == [["limited"]]
        assert (await _list(gw, "/keys", after="key_unknown"))["data"] == []

    _run(tmp_path, scenario)


def test_tenants_page_by_id(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        pages = await _all_pages(gw, "/tenants", 1)
        assert [[tenant["id"] for tenant in page] for page in pages] == [["default"], ["limited"]]
        whole = await _list(gw, "/tenants")
        assert [t["id"] for t in whole["data"]] == ["default", "limited"]

    _run(tmp_path, scenario)


def test_usage_rows_page_with_an_opaque_cursor(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        for model, tenant in (("sim-chat-1", "default"), ("sim-chat-pro", "limited")):
            chat = await gw.client.post(
                "/v1/chat/completions",
                json={"model": model, "messages": [{"role": "user", "content": "Hi"}]},
                headers=gw.auth(gw.keys[tenant]),
            )
            assert chat.status_code == 200, chat.text
        whole = await _list(gw, "/usage")
        assert len(whole["data"]) == 2 and not whole["has_more"]
        pages = await _all_pages(gw, "/usage", 1)
        assert [row for page in pages for row in page] == whole["data"]
        assert all(len(page) == 1 for page in pages)

    _run(tmp_path, scenario)


def test_a_limit_out_of_range_is_refused_naming_it(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        for path in ("/keys", "/tenants", "/usage"):
            for limit in ("0", "201", "x", "²"):
                response = await gw.client.get(
                    f"/admin/v1{path}", params={"limit": limit}, headers=ADMIN
                )
                assert response.status_code == 422, (path, limit, response.text)
                assert response.json()["error"]["details"][0]["field"] == "limit"

    _run(tmp_path, scenario)


def test_recent_tasks_of_every_tenant_page_newest_first(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        made = []
        for n in range(5):
            tenant = "limited" if n == 1 else "default"  # limited: one request a minute
            created = await gw.client.post(
                "/v1/images/generations",
                json={"model": "image-model-2", "prompt": f"fox {n}"},
                headers=gw.auth(gw.keys[tenant]),
            )
            assert created.status_code == 202, created.text
            made.append(created.json()["task_id"])
        whole = await _list(gw, "/tasks")
        assert [task["id"] for task in whole["data"]][:5] == made[::-1]  # newest first
        pages = await _all_pages(gw, "/tasks", 2)
        assert [len(page) for page in pages] == [2, 2, 1]
        assert [task["id"] for page in pages for task in page] == [t["id"] for t in whole["data"]]
        one = await _all_pages(gw, "/tasks", 1, tenant="limited")
        assert [task["id"] for page in one for task in page] == [made[1]]
        bad = await gw.client.get("/admin/v1/tasks", params={"after": "!!"}, headers=ADMIN)
        assert bad.status_code == 422 and bad.json()["error"]["details"][0]["field"] == "after"

    _run(tmp_path, scenario)
