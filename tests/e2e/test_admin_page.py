"""The admin page in a real headless Chromium (Selenium, Debian's chromium and chromium-driver)
against a real `gateway serve`: sign in, read the tables, revoke a key by its button, refused
tokens, markup in data shown as text, sign out, and a screenshot of the signed-in page. What
the page writes (keys with limits, rotation, credits, paging) is test_admin_page_writes.py.

Chromium is a system package: without it the tests skip locally and fail on CI (`CI=true`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions

from tests.e2e.admin_page_support import (
    TOKEN_KEY,
    admin_token,
    browser,
    console_errors,
    rows,
    sign_in,
    visible,
    wait,
)
from tests.e2e.media_support import post_task, root_of, wait_for_task
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.waiting import wait_until

# A tenant whose id is markup: the page must show it as text and build no element from it.
XSS_TENANT = '<img src=x id=xss-probe><script>window.pwned=1</script>"&'

ADMIN_CONFIG = f"""
[gateway]
starting_grant_credits = 1000

[providers.sim]
kind = "simulator"
task_seconds = 0.2

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
pricing = {{ input_usd_per_mtok = 5, output_usd_per_mtok = 15 }}

[[models]]
id = "image-model-2"
provider = "sim"
capabilities = ["text_to_image"]
pricing = {{ credits_per_image = {{ standard = 50, hd = 300 }} }}

[routing.auto]
chat = ["sim-chat-1"]
text_to_image = ["image-model-2"]

[tenants.default]
models = ["*"]

[tenants.'{XSS_TENANT}']
models = ["sim-chat-1"]
"""

__all__ = ["browser"]  # the fixture, from admin_page_support


@pytest.fixture(scope="module")
def admin_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, str]]:
    token, token_hash = admin_token()
    process = start_gateway(
        tmp_path_factory.mktemp("admin-gw"),
        ADMIN_CONFIG,
        extra_env={"GATEWAY_ADMIN_TOKEN_HASH": token_hash},
    )
    try:
        yield process, token
    finally:
        process.stop()


def _full_page_screenshot(driver: Any, path: Path) -> None:
    height, chrome = driver.execute_script(
        "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight]"
    )
    driver.set_window_size(1400, max(1000, int(height) + int(chrome) + 20))
    assert driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)


def _failed_callback(root: str, api_key: str) -> str:
    """A task whose callback failed (its host resolves to loopback, which callbacks may not
    reach): its id, once the failure is recorded."""
    with httpx.Client(base_url=root, headers={"Authorization": f"Bearer {api_key}"}) as api:
        body = {"model": "auto", "prompt": "a fox", "callback": {"url": "https://localhost:9/in"}}
        task_id = str(post_task(api, "/v1/images/generations", body)["task_id"])
        wait_until(
            lambda: api.get(f"/v1/tasks/{task_id}").json()["callback"]["status"],
            lambda status: status == "failed",
            what="the callback's failure",
        )
    return task_id


def _some_usage(root: str, api_key: str) -> tuple[str, str, str]:
    """One chat call and one finished image task, for the spend and task tables: the task's id
    and status, and the tenant's balance after both."""
    with httpx.Client(base_url=root, headers={"Authorization": f"Bearer {api_key}"}) as api:
        chat = api.post(
            "/v1/chat/completions",
            json={"model": "sim-chat-1", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert chat.status_code == 200, chat.text
        created = post_task(api, "/v1/images/generations", {"model": "auto", "prompt": "a fox"})
        task = wait_for_task(api, created["task_id"])
        wallet = api.get("/v1/wallet").json()
    return created["task_id"], task["status"], wallet["balance_credits"]


def test_admin_page_shows_tenants_keys_usage_and_revokes_a_key(
    browser: Any, admin_gateway: tuple[GatewayProcess, str], tmp_path: Path
) -> None:
    gateway, token = admin_gateway
    root = root_of(gateway.base_url)
    assert gateway.api_key, "serve printed no key"
    gateway.grant(XSS_TENANT, "25.5")
    second_key = gateway.new_key("default")
    hooked_id = _failed_callback(root, gateway.api_key)
    task_id, task_status, balance = _some_usage(root, gateway.api_key)
    assert task_status == "succeeded"

    page = httpx.get(f"{root}/admin")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert token not in page.text

    sign_in(browser, f"{root}/admin", token)
    wait(browser, lambda d: visible(d, "dashboard"), "the dashboard")
    wait(browser, lambda d: len(rows(d, "tenants")) == 2, "two tenant rows")
    assert browser.execute_script(f"return sessionStorage.getItem('{TOKEN_KEY}')") == token
    assert browser.execute_script("return localStorage.length") == 0
    assert token not in browser.execute_script("return document.documentElement.outerHTML")
    assert not visible(browser, "login-form") and visible(browser, "logout")

    tenants = {row["Tenant"]: row for row in rows(browser, "tenants")}
    assert set(tenants) == {"default", XSS_TENANT}
    assert tenants[XSS_TENANT]["Balance"] == "25.5000"
    assert tenants[XSS_TENANT]["Held"] == "0.0000"
    assert tenants[XSS_TENANT]["Models"] == "sim-chat-1"
    assert tenants["default"]["Balance"] == balance
    assert (tenants["default"]["Active keys"], tenants["default"]["Revoked keys"]) == ("2", "0")
    # The markup in the tenant id is text: no element was built from it, no script ran.
    assert browser.find_elements(By.ID, "xss-probe") == []
    assert browser.find_elements(By.CSS_SELECTOR, "main img, main td script") == []
    assert browser.execute_script("return window.pwned === undefined")

    keys = rows(browser, "keys")
    by_prefix = {row["Prefix"]: row for row in keys}
    assert {gateway.api_key[:10], second_key[:10]} <= set(by_prefix)
    assert {row["Tenant"] for row in keys} == {"default"}
    assert all(row["State"] == "active" for row in keys)
    second = by_prefix[second_key[:10]]
    assert second["Key id"].startswith("key_")

    spend = rows(browser, "spend")
    assert any(r["Tenant"] == "default" and r["Model"] == "sim-chat-1" for r in spend), spend
    assert any(r["Model"] == "image-model-2" and r["Tasks"] == "2" for r in spend), spend
    tasks = {row["Task id"]: row for row in rows(browser, "tasks")}
    assert tasks[task_id]["Status"] == "succeeded"
    assert tasks[task_id]["Model"] == "image-model-2"
    (failed,) = rows(browser, "callbacks")
    assert (failed["Task id"], failed["Tenant"], failed["Status"]) == (
        hooked_id,
        "default",
        "failed",
    )
    assert failed["URL"] == "https://localhost:9/in" and failed["Attempts"] == "1"
    assert "may not reach" in failed["Last error"]
    routing = {row["Model"]: row for row in rows(browser, "routing")}
    assert routing["sim-chat-1"]["Provider"] == "sim"
    assert routing["image-model-2"]["Capabilities"] == "text_to_image"
    assert {(r["Provider"], r["State"]) for r in rows(browser, "breakers")} == {("sim", "closed")}
    assert console_errors(browser) == []

    # Revoke the second key with its button; the confirmation is accepted.
    second_id = second["Key id"]
    browser.find_element(By.CSS_SELECTOR, f'button.revoke[data-key-id="{second_id}"]').click()
    wait(browser, expected_conditions.alert_is_present(), "the confirmation")
    browser.switch_to.alert.accept()

    def revoked_row(driver: Any) -> dict[str, str] | None:
        by_id = {row["Key id"]: row for row in rows(driver, "keys")}
        row = by_id.get(second_id)
        return row if row and row["State"].startswith("revoked") else None

    row = wait(browser, revoked_row, "the revoked key's row")
    assert row["Action"] == ""
    assert browser.find_elements(By.CSS_SELECTOR, f'button.revoke[data-key-id="{second_id}"]') == []
    wait(
        browser,
        lambda d: {r["Tenant"]: r for r in rows(d, "tenants")}["default"]["Revoked keys"] == "1",
        "the tenant's revoked key count",
    )
    models = f"{gateway.base_url}/models"
    refused = httpx.get(models, headers={"Authorization": f"Bearer {second_key}"})
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(models, headers={"Authorization": f"Bearer {gateway.api_key}"}).is_success
    assert console_errors(browser) == []

    # The signed-in page with the revoked key, for a person to look at.
    screenshot = tmp_path / "admin-page.png"
    _full_page_screenshot(browser, screenshot)
    assert screenshot.stat().st_size > 0
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Sign out: the token leaves sessionStorage and the tables are emptied.
    browser.find_element(By.ID, "logout").click()
    wait(browser, lambda d: visible(d, "login-form"), "the sign-in form after logout")
    assert browser.execute_script(f"return sessionStorage.getItem('{TOKEN_KEY}')") is None
    assert not visible(browser, "dashboard")
    assert rows(browser, "tenants") == [] and rows(browser, "keys") == []


def test_admin_page_refuses_a_wrong_token_and_a_tenant_key(
    browser: Any, admin_gateway: tuple[GatewayProcess, str]
) -> None:
    gateway, _ = admin_gateway
    assert gateway.api_key
    for wrong in ("gwadm-not-the-token", gateway.api_key):
        sign_in(browser, f"{root_of(gateway.base_url)}/admin", wrong)
        wait(browser, lambda d: visible(d, "error"), "the error message")
        error = browser.find_element(By.ID, "error").text
        assert "invalid_admin_token" in error and "401" in error, error
        assert visible(browser, "login-form") and not visible(browser, "dashboard")
        assert browser.execute_script(f"return sessionStorage.getItem('{TOKEN_KEY}')") is None
        assert rows(browser, "tenants") == []


def test_admin_page_says_how_to_enable_a_disabled_admin_api(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    gateway = start_gateway(tmp_path_factory.mktemp("no-admin"), ADMIN_CONFIG)
    try:
        sign_in(browser, f"{root_of(gateway.base_url)}/admin", "gwadm-anything")
        wait(browser, lambda d: visible(d, "error"), "the error message")
        error = browser.find_element(By.ID, "error").text
        assert "disabled" in error and "GATEWAY_ADMIN_TOKEN_HASH" in error, error
        assert "admin_disabled" in error
        assert not visible(browser, "dashboard")
    finally:
        gateway.stop()
