"""GET /admin, in process: the page and its two assets, their headers, and what the HTML and
script are allowed to contain (no inline script, no external asset, no string-to-HTML sink).
The page driven in a real browser is tests/e2e/test_admin_page.py."""

from __future__ import annotations

import asyncio
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gateway.api.admin_page import CONTENT_SECURITY_POLICY, SCRIPTS
from tests.api.support import InProcessApp, in_process_app

pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

PAGE_IDS = {
    "admin-token", "login", "logout", "error",
    "tenants", "keys", "spend", "tasks", "routing", "breakers",
    "key-form", "secret-panel", "rotate-form", "credit-form", "credit-review-panel", "ledger",
    "tenants-pager", "keys-pager", "spend-pager", "ledger-pager",
}  # fmt: skip


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text += data


def _page_checks(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        for path in ("/admin", "/admin/"):
            response = await gw.client.get(path)
            assert response.status_code == 200, (path, response.text)
            assert response.headers["content-type"] == "text/html; charset=utf-8"
            assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["cache-control"] == "no-store"
        html = response.text
        assert gw.key not in html
        tags = _Tags()
        tags.feed(html)
        ids = {attrs.get("id") for _, attrs in tags.tags}
        assert ids >= PAGE_IDS, PAGE_IDS - ids
        scripts = [attrs for tag, attrs in tags.tags if tag == "script"]
        assert scripts == [{"type": "module", "src": "/admin/assets/admin.js"}]
        assert tags.script_text.strip() == ""
        for tag, attrs in tags.tags:
            assert not [name for name in attrs if name.startswith("on")], (tag, attrs)
            for name in ("src", "href"):
                assert not (attrs.get(name) or "/").startswith(("http", "//")), (tag, attrs)
        labelled = {attrs.get("for") for tag, attrs in tags.tags if tag == "label"}
        fields = {attrs.get("id") for tag, attrs in tags.tags if tag in ("input", "select")}
        fields |= {attrs.get("id") for tag, attrs in tags.tags if tag == "textarea"}
        assert fields <= labelled, fields - labelled  # every field says what it is

        imported: set[str] = set()
        for name in SCRIPTS:
            script = await gw.client.get(f"/admin/assets/{name}")
            assert script.status_code == 200, name
            assert script.headers["content-type"] == "text/javascript; charset=utf-8"
            sinks = re.findall(
                r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function",
                script.text,
            )
            assert sinks == [], name
            assert "localStorage" not in script.text, name
            # Modules import one another by relative path only: nothing from elsewhere.
            imports = re.findall(r"""from\s+["']([^"']+)["']|import\(""", script.text)
            assert all(path.startswith("./") for path in imports), (name, imports)
            imported |= {path.removeprefix("./") for path in imports}
            if name == "api.js":
                assert "sessionStorage" in script.text
        assert imported == set(SCRIPTS) - {"admin.js"}
        style = await gw.client.get("/admin/assets/admin.css")
        assert style.status_code == 200
        assert style.headers["content-type"] == "text/css; charset=utf-8"
        assert "@import" not in style.text and "url(" not in style.text

        for missing in ("index.html", "other.js", "__init__.py"):
            response = await gw.client.get(f"/admin/assets/{missing}")
            assert response.status_code == 404, missing
            assert response.json()["error"]["code"] == "not_found"

    async def main() -> None:
        async with in_process_app(tmp_path) as gateway:
            await scenario(gateway)

    asyncio.run(main())


def test_admin_page_and_assets_are_served_with_a_strict_policy(tmp_path: Path) -> None:
    _page_checks(tmp_path)
