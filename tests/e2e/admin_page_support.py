"""Driving the admin page in a real headless Chromium (Selenium, Debian's chromium and
chromium-driver, nothing fetched): the browser fixture, an admin token made by the CLI, and
reading the page's tables and forms as a person sees them.

Chromium is a system package: without it the tests skip locally and fail on CI (`CI=true`)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait

from tests.support.gateway_process import ROOT

__all__ = [
    "TOKEN_KEY",
    "WAIT_SECONDS",
    "admin_token",
    "browser",
    "console_errors",
    "rows",
    "set_field",
    "sign_in",
    "text_of",
    "visible",
    "wait",
]

TOKEN_KEY = "gateway.adminToken"
WAIT_SECONDS = 15


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Chromium is required on CI: {reason}")
    pytest.skip(f"no headless browser: {reason}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module, driven by Debian's chromedriver (nothing fetched)."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    for path, package in ((chromium, "chromium"), (driver_path, "chromium-driver")):
        if not os.access(path, os.X_OK):
            _unavailable(f"{path} is missing (Debian package {package})")
    options = Options()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--window-size=1400,1000",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(WAIT_SECONDS)
    try:
        yield driver
    finally:
        driver.quit()


def admin_token() -> tuple[str, str]:
    """A new admin token and its `GATEWAY_ADMIN_TOKEN_HASH` value, from `gateway admin token`."""
    result = subprocess.run(
        [sys.executable, "-m", "gateway.app.cli", "admin", "token"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    token = result.stdout.strip()
    [line] = [x for x in result.stderr.splitlines() if x.startswith("GATEWAY_ADMIN_TOKEN_HASH=")]
    token_hash = line.split("=", 1)[1]
    assert token.startswith("gwadm-"), result.stdout
    assert token_hash == "sha256:" + hashlib.sha256(token.encode()).hexdigest()
    return token, token_hash


def wait(driver: Any, condition: Any, what: str) -> Any:
    try:
        return WebDriverWait(driver, WAIT_SECONDS).until(condition)
    except TimeoutException:
        error = driver.execute_script("return document.getElementById('error').textContent")
        raise AssertionError(f"timed out waiting for {what}; #error: {error!r}") from None


def rows(driver: Any, table_id: str) -> list[dict[str, str]]:
    """The body rows of a table as {header: cell text} (textContent, as the DOM holds it)."""
    found: list[dict[str, str]] = driver.execute_script(
        """
        const table = document.getElementById(arguments[0]);
        const heads = Array.from(table.tHead.rows[0].cells, (th) => th.textContent.trim());
        return Array.from(table.tBodies[0].rows)
          .filter((tr) => !tr.querySelector('td.empty'))
          .map((tr) => Object.fromEntries(
            Array.from(tr.cells, (td, i) => [heads[i], td.textContent])));
        """,
        table_id,
    )
    return found


def visible(driver: Any, element_id: str) -> bool:
    return bool(driver.find_element(By.ID, element_id).is_displayed())


def text_of(driver: Any, element_id: str) -> str:
    """An element's textContent (as the DOM holds it, shown or not)."""
    text: str = driver.execute_script(
        "return document.getElementById(arguments[0]).textContent", element_id
    )
    return text


def set_field(driver: Any, element_id: str, value: str) -> None:
    """Types `value` into a field as a person would (a select picks the option of that value)."""
    element = driver.find_element(By.ID, element_id)
    if element.tag_name == "select":
        Select(element).select_by_value(value)
        return
    element.clear()
    if value:
        element.send_keys(value)


def sign_in(driver: Any, page_url: str, token: str) -> None:
    """Opens the page signed out (a token an earlier test left in the tab is dropped) and
    signs in with `token`."""
    driver.get(page_url)
    driver.execute_script("window.sessionStorage.clear()")
    driver.refresh()
    wait(driver, lambda d: visible(d, "login-form"), "the sign-in form")
    set_field(driver, "admin-token", token)
    driver.find_element(By.ID, "login").click()


def console_errors(driver: Any, *, refusals_shown: bool = False) -> list[str]:
    """Severe console lines (script errors, CSP refusals, failed loads) but the missing favicon;
    with `refusals_shown`, also but the admin API's error answers (the browser logs each 4xx a
    script asked for; a test that provokes them checks that the page shows them)."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE"
        and "favicon.ico" not in entry["message"]
        and not (refusals_shown and "/admin/v1/" in entry["message"])
    ]
