"""What the admin page writes, in a real headless Chromium against a real `gateway serve`: a
key made with a budget and a model list whose secret (shown once) makes a chat call and whose
spend the page then shows; an edit, a rotation with and without grace, a revocation; a grant
and an adjustment that move nothing until confirmed; API refusals shown beside their form;
and every list the page shows (tenants, keys, spend, tasks, a tenant's ledger) paged by the
API."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions

from tests.e2e.admin_page_support import (
    admin_token,
    browser,
    console_errors,
    rows,
    set_field,
    sign_in,
    text_of,
    visible,
    wait,
)
from tests.e2e.media_support import root_of
from tests.support.gateway_process import GatewayProcess, start_gateway

__all__ = ["browser"]  # the fixture, from admin_page_support

CONFIG = """
[gateway]
starting_grant_credits = 1000

[providers.sim]
kind = "simulator"
task_seconds = 0.05

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[[models]]
id = "sim-chat-pro"
provider = "sim"
capability = "chat"
pricing = { input_usd_per_mtok = 10, output_usd_per_mtok = 30 }

[[models]]
id = "image-model-2"
provider = "sim"
capabilities = ["text_to_image"]
pricing = { credits_per_image = { standard = 1, hd = 2 } }

[routing.auto]
chat = ["sim-chat-1"]
text_to_image = ["image-model-2"]

[tenants.default]
models = ["*"]
"""

# More tenants than one page of the page's tables (20 rows).
MANY_TENANTS = 23
PAGE_SIZE = 20


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, str]]:
    token, token_hash = admin_token()
    process = start_gateway(
        tmp_path_factory.mktemp("admin-writes"),
        CONFIG,
        extra_env={"GATEWAY_ADMIN_TOKEN_HASH": token_hash},
    )
    try:
        yield process, token
    finally:
        process.stop()


def _admin(gateway: GatewayProcess, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"{root_of(gateway.base_url)}/admin/v1",
        headers={"Authorization": f"Bearer {token}"},
    )


def _signed_in(driver: Any, gateway: GatewayProcess, token: str) -> None:
    sign_in(driver, f"{root_of(gateway.base_url)}/admin", token)
    wait(driver, lambda d: visible(d, "dashboard"), "the dashboard")
    wait(driver, lambda d: rows(d, "tenants"), "the tenant rows")


def _chat(gateway: GatewayProcess, key: str, model: str = "sim-chat-1") -> httpx.Response:
    return httpx.post(
        f"{gateway.base_url}/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hello there"}]},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def _find_key(driver: Any, key_id: str) -> dict[str, str]:
    """The key's row, found with the page's own filter (its id)."""
    set_field(driver, "keys-tenant", "")
    set_field(driver, "keys-prefix", key_id)
    driver.find_element(By.ID, "keys-find").click()
    found: list[dict[str, str]] = wait(
        driver,
        lambda d: [r for r in rows(d, "keys") if r["Key id"] == key_id] or None,
        f"the row of {key_id}",
    )
    assert len(rows(driver, "keys")) == 1
    return found[0]


def _wait_row(driver: Any, key_id: str, done: Any, what: str) -> dict[str, str]:
    def check(d: Any) -> dict[str, str] | None:
        found = [r for r in rows(d, "keys") if r["Key id"] == key_id]
        return found[0] if found and done(found[0]) else None

    result: dict[str, str] = wait(driver, check, what)
    return result


def _secret(driver: Any) -> tuple[str, str]:
    """The secret the page shows once, and the key id beside it."""
    wait(driver, lambda d: visible(d, "secret-panel"), "the new secret")
    return text_of(driver, "secret-value"), text_of(driver, "secret-key-id")


def _done_with_secret(driver: Any, secret: str) -> None:
    """Done: the secret leaves the page, and the tab never stored it."""
    driver.find_element(By.ID, "secret-done").click()
    assert not visible(driver, "secret-panel")
    assert secret not in driver.execute_script("return document.documentElement.outerHTML")
    stored = driver.execute_script(
        "return JSON.stringify([{...sessionStorage}, {...localStorage}, document.cookie])"
    )
    assert secret not in stored


def _key(gateway: GatewayProcess, token: str, key_id: str) -> dict[str, Any]:
    with _admin(gateway, token) as admin:
        [key] = admin.get("/keys", params={"prefix": key_id}).json()["data"]
    found: dict[str, Any] = key
    return found


def test_a_key_made_on_the_page_calls_with_its_secret_and_shows_its_spend(
    browser: Any, gateway: tuple[GatewayProcess, str]
) -> None:
    process, token = gateway
    _signed_in(browser, process, token)
    browser.find_element(By.ID, "new-key").click()
    wait(browser, lambda d: visible(d, "key-form"), "the key form")
    for field, value in (
        ("key-tenant", "default"),
        ("key-name", "search-team"),
        ("key-models", "sim-chat-1"),
        ("key-budget", "5"),
        ("key-period", "month"),
        ("key-rpm", "30"),
        ("key-metadata", "team=search\nowner=ana"),
    ):
        set_field(browser, field, value)
    browser.find_element(By.ID, "key-save").click()
    secret, key_id = _secret(browser)
    assert secret.startswith("gw-") and key_id.startswith("key_")
    assert not visible(browser, "key-form")

    made = _key(process, token, key_id)
    assert made["name"] == "search-team" and made["models"] == ["sim-chat-1"]
    assert made["budget"]["credits"] == "5.0000" and made["budget"]["period"] == "month"
    assert made["requests_per_minute"] == 30
    assert made["metadata"] == {"team": "search", "owner": "ana"}
    row = _find_key(browser, key_id)
    assert (row["Name"], row["Models"], row["Budget"]) == (
        "search-team",
        "sim-chat-1",
        "5.0000 / month",
    )
    assert (row["Spent"], row["Remaining"], row["State"]) == ("0.0000", "5.0000", "active")
    assert "30 req/min" in row["Limits"] and row["Metadata"] == "team=search, owner=ana"

    # The secret the page showed calls the gateway; a model outside its list is refused.
    chat = _chat(process, secret)
    assert chat.status_code == 200, chat.text
    charge = Decimal(chat.json()["usage"]["credits"])
    assert charge > 0
    outside = _chat(process, secret, "sim-chat-pro")
    assert outside.status_code == 404 and outside.json()["error"]["code"] == "model_not_found"
    _done_with_secret(browser, secret)

    # Reloaded, the page shows what the key spent, as the API counts it.
    browser.find_element(By.ID, "refresh").click()
    row = _wait_row(browser, key_id, lambda r: r["Spent"] != "0.0000", "the key's spend")
    assert Decimal(row["Spent"]) == charge
    assert Decimal(row["Remaining"]) == Decimal(5) - charge
    assert row["Last used"] != ""
    assert console_errors(browser) == []


def test_a_key_is_edited_rotated_and_revoked_on_the_page(
    browser: Any, gateway: tuple[GatewayProcess, str]
) -> None:
    process, token = gateway
    with _admin(process, token) as admin:
        made = admin.post(
            "/keys", json={"tenant": "default", "name": "ci-bot", "requests_per_minute": 50}
        )
        assert made.status_code == 201, made.text
    key_id, secret = made.json()["id"], made.json()["key"]
    _signed_in(browser, process, token)
    # A filter the API refuses: its answer in words, the table left as it was.
    shown = rows(browser, "keys")
    set_field(browser, "keys-tenant", "ghost")
    browser.find_element(By.ID, "keys-find").click()
    wait(browser, lambda d: "tenant_not_found" in text_of(d, "error"), "the refused filter")
    assert "HTTP 404" in text_of(browser, "error") and "'ghost'" in text_of(browser, "error")
    assert rows(browser, "keys") == shown
    _find_key(browser, key_id)
    assert not visible(browser, "error")

    # Edit: a new name and a daily budget; the emptied rate limit is removed.
    browser.find_element(By.CSS_SELECTOR, f'button.edit[data-key-id="{key_id}"]').click()
    wait(browser, lambda d: visible(d, "key-form"), "the edit form")
    assert browser.find_element(By.ID, "key-name").get_attribute("value") == "ci-bot"
    assert browser.find_element(By.ID, "key-rpm").get_attribute("value") == "50"
    assert not browser.find_element(By.ID, "key-tenant").is_enabled()
    set_field(browser, "key-name", "ci-bot-2")
    set_field(browser, "key-rpm", "")
    set_field(browser, "key-budget", "50")
    set_field(browser, "key-period", "day")
    browser.find_element(By.ID, "key-save").click()
    row = _wait_row(browser, key_id, lambda r: r["Name"] == "ci-bot-2", "the edited row")
    assert row["Budget"] == "50.0000 / day" and row["Limits"] == ""
    edited = _key(process, token, key_id)
    assert edited["requests_per_minute"] is None and edited["budget"]["period"] == "day"

    # A refused edit: the API's message, code and field beside the form; nothing changed.
    browser.find_element(By.CSS_SELECTOR, f'button.edit[data-key-id="{key_id}"]').click()
    set_field(browser, "key-expires", "2020-01-01T00:00:00Z")
    browser.find_element(By.ID, "key-save").click()
    wait(browser, lambda d: visible(d, "key-form-error"), "the refusal")
    refusal = text_of(browser, "key-form-error")
    assert "HTTP 422" in refusal and "expires_at" in refusal, refusal
    assert _key(process, token, key_id)["expires_at"] is None
    browser.find_element(By.ID, "key-cancel").click()

    # Rotate with a grace period: the new secret is shown once; both secrets work meanwhile.
    browser.find_element(By.CSS_SELECTOR, f'button.rotate[data-key-id="{key_id}"]').click()
    wait(browser, lambda d: visible(d, "rotate-panel"), "the rotate form")
    set_field(browser, "rotate-grace", "3600")
    browser.find_element(By.ID, "rotate-confirm").click()
    rotated, same_id = _secret(browser)
    assert same_id == key_id and rotated != secret and rotated.startswith("gw-")
    for usable in (rotated, secret):
        assert _chat(process, usable).status_code == 200
    _done_with_secret(browser, rotated)
    browser.find_element(By.ID, "refresh").click()
    row = _wait_row(browser, key_id, lambda r: r["Spent"] != "0.0000", "the rotated key's spend")
    assert row["Name"] == "ci-bot-2" and row["Budget"] == "50.0000 / day"  # the same key
    assert Decimal(row["Spent"]) == Decimal(_key(process, token, key_id)["budget"]["spent"])

    # Rotate again without grace: the secret it replaces is refused at once.
    browser.find_element(By.CSS_SELECTOR, f'button.rotate[data-key-id="{key_id}"]').click()
    set_field(browser, "rotate-grace", "0")
    browser.find_element(By.ID, "rotate-confirm").click()
    latest, _ = _secret(browser)
    assert _chat(process, latest).status_code == 200
    assert _chat(process, rotated).status_code == 401
    _done_with_secret(browser, latest)

    # Revoke, after the browser's confirmation.
    browser.find_element(By.CSS_SELECTOR, f'button.revoke[data-key-id="{key_id}"]').click()
    wait(browser, expected_conditions.alert_is_present(), "the confirmation")
    browser.switch_to.alert.accept()
    row = _wait_row(browser, key_id, lambda r: r["State"].startswith("revoked"), "the revocation")
    assert row["Action"] == ""
    refused = _chat(process, latest)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    assert console_errors(browser, refusals_shown=True) == []


def _balance(gateway: GatewayProcess, token: str, tenant: str) -> Decimal:
    with _admin(gateway, token) as admin:
        return Decimal(admin.get(f"/tenants/{tenant}").json()["balance"])


def _review(driver: Any, kind: str, amount: str, reason: str) -> str:
    set_field(driver, "credit-kind", kind)
    set_field(driver, "credit-amount", amount)
    set_field(driver, "credit-reason", reason)
    driver.find_element(By.ID, "credit-review").click()
    wait(driver, lambda d: visible(d, "credit-review-panel"), "the review step")
    return text_of(driver, "credit-summary")


def test_credits_move_only_once_confirmed_and_show_in_the_ledger(
    browser: Any, gateway: tuple[GatewayProcess, str]
) -> None:
    process, token = gateway
    _signed_in(browser, process, token)
    browser.find_element(By.CSS_SELECTOR, 'button.credits[data-tenant="default"]').click()
    wait(browser, lambda d: visible(d, "ledger-section"), "the tenant's ledger")
    assert browser.find_element(By.ID, "credit-tenant").get_attribute("value") == "default"
    before = _balance(process, token, "default")

    summary = _review(browser, "grant", "12.5", "invoice 7")
    assert f"Balance now {before:.4f}, after {before + Decimal('12.5'):.4f}" in summary, summary
    assert "Grant 12.5000 credits, tenant default." in summary
    entry_id = summary.rsplit("Entry id: ", 1)[1].strip()
    assert entry_id.startswith("admin-page:")
    assert _balance(process, token, "default") == before  # reviewed, not applied
    # Back and review the same operation again: the same entry id (it may have been sent).
    browser.find_element(By.ID, "credit-back").click()
    assert visible(browser, "credit-form") and not visible(browser, "credit-review-panel")
    assert _balance(process, token, "default") == before
    assert _review(browser, "grant", "12.5", "invoice 7").endswith(entry_id)

    browser.find_element(By.ID, "credit-confirm").click()
    wait(browser, lambda d: visible(d, "credit-result"), "the grant's result")
    assert f"balance {before + Decimal('12.5'):.4f}" in text_of(browser, "credit-result")
    assert _balance(process, token, "default") == before + Decimal("12.5")
    newest = wait(browser, lambda d: (rows(d, "ledger") or [None])[0], "the ledger")
    assert (newest["Kind"], newest["Amount"], newest["Reason"], newest["Entry id"]) == (
        "grant",
        "12.5000",
        "invoice 7",
        entry_id,
    )
    wait(
        browser,
        lambda d: (
            {r["Tenant"]: r for r in rows(d, "tenants")}["default"]["Balance"]
            == f"{before + Decimal('12.5'):.4f}"
        ),
        "the tenant's new balance",
    )

    # An adjustment takes credits away, also after its review.
    _review(browser, "adjustment", "-2.5", "refund ticket 9")
    browser.find_element(By.ID, "credit-confirm").click()
    wait(browser, lambda d: rows(d, "ledger")[0]["Amount"] == "-2.5000", "the adjustment")
    assert _balance(process, token, "default") == before + Decimal(10)

    # Refusals: the API's words beside the form, and no credit moved.
    _review(browser, "grant", "-3", "oops")
    browser.find_element(By.ID, "credit-confirm").click()
    wait(browser, lambda d: visible(d, "credit-error"), "the refused grant")
    refusal = text_of(browser, "credit-error")
    assert "HTTP 422" in refusal and "amount:" in refusal, refusal
    assert visible(browser, "credit-form")
    set_field(browser, "credit-tenant", "ghost")
    browser.find_element(By.ID, "credit-review").click()
    wait(browser, lambda d: "tenant_not_found" in text_of(d, "credit-error"), "the unknown tenant")
    assert "HTTP 404" in text_of(browser, "credit-error")
    assert not visible(browser, "credit-review-panel")
    assert _balance(process, token, "default") == before + Decimal(10)
    assert console_errors(browser, refusals_shown=True) == []


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, str]]:
    """A gateway with more tenants, keys, spend rows, ledger entries and tasks than one page
    holds."""
    token, token_hash = admin_token()
    tenants = "".join(
        f'\n[tenants.team-{n:02d}]\nmodels = ["*"]\n' for n in range(MANY_TENANTS - 1)
    )
    process = start_gateway(
        tmp_path_factory.mktemp("admin-crowded"),
        CONFIG + tenants,
        extra_env={"GATEWAY_ADMIN_TOKEN_HASH": token_hash},
    )
    try:
        with _admin(process, token) as admin:
            for n in range(MANY_TENANTS - 1):
                tenant = f"team-{n:02d}"
                grant = {"amount": "10", "reason": "paging", "id": f"paging-{tenant}"}
                assert admin.post(f"/tenants/{tenant}/grants", json=grant).status_code == 201
                key = admin.post("/keys", json={"tenant": tenant}).json()["key"]
                assert _chat(process, key).status_code == 200  # one spend row per tenant
            for n in range(PAGE_SIZE + 3):
                entry = {"amount": "1", "reason": f"entry {n}", "id": f"e-{uuid.uuid4().hex}"}
                assert admin.post("/tenants/default/grants", json=entry).status_code == 201
        with httpx.Client(
            base_url=process.base_url, headers={"Authorization": f"Bearer {process.api_key}"}
        ) as api:
            for n in range(PAGE_SIZE + 3):
                body = {"model": "image-model-2", "prompt": f"fox {n}"}
                assert api.post("/images/generations", json=body).status_code == 202
        yield process, token
    finally:
        process.stop()


def _column(driver: Any, table_id: str, key: str) -> list[str]:
    return [r[key] for r in rows(driver, table_id)]


def _turn(driver: Any, table_id: str, key: str, direction: str) -> list[str]:
    """Presses the table's Previous or Next page button; the rows of the page it shows."""
    before = _column(driver, table_id, key)
    pager = driver.find_element(By.ID, f"{table_id}-pager")
    pager.find_element(By.CLASS_NAME, f"pager-{direction}").click()
    wait(driver, lambda d: _column(d, table_id, key) != before, f"{table_id}'s {direction} page")
    return _column(driver, table_id, key)


def _pages(driver: Any, table_id: str, key: str) -> list[list[str]]:
    """Every page of a table, by its Next button, then back to the first by Previous."""
    pager = driver.find_element(By.ID, f"{table_id}-pager")
    pages = [_column(driver, table_id, key)]
    while pager.find_element(By.CLASS_NAME, "pager-next").is_enabled():
        pages.append(_turn(driver, table_id, key, "next"))
    assert f"Page {len(pages)}" in text_of(driver, f"{table_id}-pager")
    for _ in pages[1:]:
        _turn(driver, table_id, key, "prev")
    assert _column(driver, table_id, key) == pages[0]
    assert not pager.find_element(By.CLASS_NAME, "pager-prev").is_enabled()
    return pages


def _joined(pages: list[list[str]]) -> list[str]:
    return [item for page in pages for item in page]


def test_every_list_on_the_page_pages(browser: Any, crowded: tuple[GatewayProcess, str]) -> None:
    process, token = crowded
    _signed_in(browser, process, token)
    with _admin(process, token) as admin:
        all_tenants = [t["id"] for t in admin.get("/tenants").json()["data"]]
        all_keys = [k["id"] for k in admin.get("/keys").json()["data"]]
        all_usage = admin.get("/usage").json()["data"]
        ledger = admin.get("/tenants/default/ledger", params={"limit": "100"}).json()["data"]
        all_tasks = [t["id"] for t in admin.get("/tasks", params={"limit": "100"}).json()["data"]]
    assert len(all_tenants) == MANY_TENANTS and len(all_keys) > PAGE_SIZE
    assert len(all_usage) > PAGE_SIZE and len(ledger) > PAGE_SIZE and len(all_tasks) > PAGE_SIZE

    tenant_pages = _pages(browser, "tenants", "Tenant")
    assert [len(p) for p in tenant_pages] == [PAGE_SIZE, MANY_TENANTS - PAGE_SIZE]
    assert _joined(tenant_pages) == all_tenants
    key_pages = _pages(browser, "keys", "Key id")
    assert len(key_pages) == 2 and _joined(key_pages) == all_keys
    spend_pages = _pages(browser, "spend", "Tenant")
    assert _joined(spend_pages) == [row["tenant"] for row in all_usage]
    assert len(spend_pages[0]) == PAGE_SIZE
    task_pages = _pages(browser, "tasks", "Task id")
    assert len(task_pages) == 2 and _joined(task_pages) == all_tasks

    browser.find_element(By.CSS_SELECTOR, 'button.credits[data-tenant="default"]').click()
    wait(browser, lambda d: len(rows(d, "ledger")) == PAGE_SIZE, "a full ledger page")
    ledger_pages = _pages(browser, "ledger", "Entry id")
    assert _joined(ledger_pages) == [entry["id"] for entry in ledger]
    assert console_errors(browser) == []
