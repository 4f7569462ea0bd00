// The admin page: reads /admin/v1 with the admin token kept in this tab's sessionStorage.
// Every value from the API reaches the page through textContent or an attribute, never as
// HTML, so a tenant id or task field that holds markup shows as text (the page's CSP also
// refuses inline script and string-to-HTML sinks).
"use strict";

(() => {
  const TOKEN_KEY = "gateway.adminToken";
  const API = "/admin/v1";
  const ENABLE_HINT =
    "To enable it, run `gateway admin token` once: keep the gwadm- token it prints, set the " +
    "GATEWAY_ADMIN_TOKEN_HASH=sha256:... line it prints in the gateway's environment, and " +
    "restart the gateway.";

  const $ = (id) => document.getElementById(id);

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  const token = () => sessionStorage.getItem(TOKEN_KEY);

  async function api(path, method = "GET") {
    let response;
    try {
      response = await fetch(API + path, {
        method,
        headers: { Authorization: `Bearer ${token() || ""}`, Accept: "application/json" },
        cache: "no-store",
        credentials: "omit",
        redirect: "error",
      });
    } catch (exc) {
      throw new ApiError(0, "network_error", `The gateway did not answer (${exc.message}).`);
    }
    let payload = null;
    try {
      payload = await response.json();
    } catch {
      payload = null;
    }
    if (!response.ok) {
      const error = (payload && payload.error) || {};
      throw new ApiError(
        response.status,
        error.code || `http_${response.status}`,
        error.message || response.statusText || "Request failed.",
      );
    }
    return payload;
  }

  const isAuthError = (exc) => exc instanceof ApiError && (exc.status === 401 || exc.status === 403);

  function describe(exc) {
    if (exc instanceof ApiError) {
      return exc.status ? `${exc.message} (${exc.code}, HTTP ${exc.status})` : exc.message;
    }
    return `The page could not show an answer: ${exc && exc.message ? exc.message : exc}`;
  }

  function authMessage(exc) {
    if (exc.code === "admin_disabled") {
      return `The admin API is disabled on this gateway (${exc.code}, HTTP ${exc.status}). ${ENABLE_HINT}`;
    }
    if (exc.status === 401) {
      return `The admin token was refused: ${exc.message} (${exc.code}, HTTP 401). ` +
        "Check the token and sign in again.";
    }
    return `Access denied: ${exc.message} (${exc.code}, HTTP ${exc.status}).`;
  }

  function showError(text) {
    const box = $("error");
    box.textContent = text;
    box.hidden = !text;
  }

  function setStatus(text) {
    $("status").textContent = text;
  }

  // ---- rendering: text only -------------------------------------------------------------

  function cell(value, className) {
    const td = document.createElement("td");
    td.textContent = value === null || value === undefined ? "" : String(value);
    if (className) td.className = className;
    return td;
  }

  function row(cells) {
    const tr = document.createElement("tr");
    tr.append(...cells);
    return tr;
  }

  function fill(tableId, items, toRow, emptyText) {
    const table = $(tableId);
    const body = table.tBodies[0];
    if (!items.length) {
      const td = cell(emptyText, "empty");
      td.colSpan = table.tHead.rows[0].cells.length;
      body.replaceChildren(row([td]));
      return;
    }
    body.replaceChildren(...items.map(toRow));
  }

  // "2026-11-23T19:39:06.410055Z" -> "2026-11-23 19:39:06 UTC"; the full value stays in the title.
  function shortTime(value) {
    const match = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(value || "");
    if (!match) return value;
    return `${match[1]} ${match[2]} ${match[3] === "Z" || match[3] === "+00:00" ? "UTC" : match[3]}`;
  }

  function timeCell(value) {
    const td = cell(shortTime(value), "time");
    if (value) td.title = value;
    return td;
  }

  const NUM = "num";
  const list = (values) => (Array.isArray(values) ? values.join(", ") : values);

  function tenantRow(tenant) {
    const keys = tenant.keys || {};
    const tr = row([
      cell(tenant.id),
      cell(tenant.balance, NUM),
      cell(tenant.held, NUM),
      cell(list(tenant.models)),
      cell(tenant.requests_per_minute, NUM),
      cell(tenant.tokens_per_minute, NUM),
      cell(keys.active, NUM),
      cell(keys.revoked, NUM),
    ]);
    tr.dataset.tenant = tenant.id;
    return tr;
  }

  function keyRow(key) {
    const revoked = Boolean(key.revoked_at);
    const action = document.createElement("td");
    if (!revoked) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "revoke";
      button.dataset.keyId = key.id;
      button.dataset.tenant = key.tenant;
      button.textContent = "Revoke";
      button.setAttribute("aria-label", `Revoke key ${key.id}`);
      action.append(button);
    }
    const tr = row([
      cell(key.id),
      cell(key.tenant),
      cell(key.prefix, "mono"),
      timeCell(key.created_at),
      revoked
        ? cell(`revoked ${shortTime(key.revoked_at)}`, "state state-revoked")
        : cell("active", "state state-active"),
      action,
    ]);
    tr.dataset.keyId = key.id;
    if (revoked) tr.classList.add("revoked");
    return tr;
  }

  function spendRow(line) {
    return row([
      cell(line.day),
      cell(line.tenant),
      cell(line.model || "(not recorded)"),
      cell(line.requests, NUM),
      cell(line.tasks, NUM),
      cell(line.charged, NUM),
      cell(line.refunded, NUM),
      cell(line.spend, NUM),
    ]);
  }

  // The task API's progress is {percent, stage, message}; a bare number is a percent.
  function progressText(progress) {
    if (progress === null || progress === undefined) return "";
    if (typeof progress !== "object") return typeof progress === "number" ? `${progress}%` : progress;
    const percent = typeof progress.percent === "number" ? `${progress.percent}%` : "";
    return [percent, progress.stage].filter(Boolean).join(" ");
  }

  function taskRow(task) {
    const progress = progressText(task.progress);
    const tr = row([
      cell(task.id, "mono"),
      cell(task.tenant),
      cell(task.capability),
      cell(task.model),
      cell(task.status, `status status-${String(task.status).replace(/[^a-z_]/g, "")}`),
      cell(progress, NUM),
      timeCell(task.created_at),
      timeCell(task.finished_at),
      cell(task.cost, NUM),
    ]);
    tr.dataset.taskId = task.id;
    return tr;
  }

  function callbackRow(item) {
    return row([
      cell(item.task_id, "mono"),
      cell(item.tenant),
      cell(item.url, "small"),
      cell(item.status, `status status-${String(item.status).replace(/[^a-z_]/g, "")}`),
      cell(item.attempt_count, NUM),
      cell(item.last_error, "small"),
      timeCell(item.finished_at),
    ]);
  }

  const SHOWN_MODEL_FIELDS = new Set(["id", "capabilities", "provider"]);

  function modelRow(model) {
    const others = Object.entries(model)
      .filter(([name, value]) => !SHOWN_MODEL_FIELDS.has(name) && value !== null && value !== "")
      .map(([name, value]) => `${name}=${typeof value === "string" ? value : JSON.stringify(value)}`);
    return row([
      cell(model.id),
      cell(list(model.capabilities)),
      cell(model.provider),
      cell(others.join("; "), "small"),
    ]);
  }

  function breakerRow(breaker) {
    const state = String(breaker.state);
    return row([cell(breaker.provider), cell(state, `state state-${state.replace(/[^a-z_]/g, "")}`)]);
  }

  // ---- loading --------------------------------------------------------------------------

  async function loadTenants() {
    const page = await api("/tenants");
    fill("tenants", page.data, tenantRow, "No tenants.");
  }

  async function loadKeys() {
    const page = await api("/keys");
    fill("keys", page.data, keyRow, "No keys.");
  }

  async function loadSpend() {
    const usage = await api("/usage");
    $("spend-caption").textContent =
      `From ${shortTime(usage.from)} to ${shortTime(usage.to)}; days are UTC days.`;
    fill("spend", usage.data, spendRow, "No spend in this range.");
  }

  async function loadTasks() {
    const status = $("task-status").value;
    const query = status ? `?status=${encodeURIComponent(status)}` : "";
    const page = await api(`/tasks${query}`);
    fill("tasks", page.data, taskRow, status ? `No ${status} tasks.` : "No tasks yet.");
  }

  async function loadCallbacks() {
    const page = await api("/callbacks/failed");
    fill("callbacks", page.data, callbackRow, "No failed callbacks.");
  }

  async function loadRouting() {
    const routing = await api("/routing");
    $("routing-caption").textContent =
      `Models in the routing file in force (version ${routing.config_version}).`;
    fill("routing", routing.models || [], modelRow, "No models.");
    const auto = Object.entries(routing.auto || {}).map(([capability, target]) =>
      row([cell(capability), cell(Array.isArray(target) ? target.join(" → ") : target)]),
    );
    fill("auto", auto, (tr) => tr, "No auto routes.");
    fill("breakers", routing.breakers || [], breakerRow, "No breakers.");
  }

  // Runs every part; an auth failure signs out, other failures are listed in #error.
  async function run(parts) {
    const results = await Promise.allSettled(parts.map((part) => part()));
    const failures = results.filter((r) => r.status === "rejected").map((r) => r.reason);
    const auth = failures.find(isAuthError);
    if (auth) {
      signOut();
      showError(authMessage(auth));
      return false;
    }
    showError(failures.map(describe).join("\n"));
    return true;
  }

  async function loadAll() {
    setStatus("Loading…");
    const ok = await run([loadTenants, loadKeys, loadSpend, loadTasks, loadCallbacks, loadRouting]);
    if (ok) {
      showSignedIn();
      setStatus(`Updated ${new Date().toLocaleTimeString()}`);
    }
  }

  // ---- actions --------------------------------------------------------------------------

  async function revoke(button) {
    const keyId = button.dataset.keyId;
    const tenant = button.dataset.tenant;
    if (!window.confirm(`Revoke key ${keyId} of tenant ${tenant}? Calls with it are refused at once.`)) {
      return;
    }
    button.disabled = true;
    try {
      const key = await api(`/keys/${encodeURIComponent(keyId)}/revoke`, "POST");
      button.closest("tr").replaceWith(keyRow(key));
      setStatus(`Key ${keyId} revoked.`);
      await run([loadTenants]);
    } catch (exc) {
      button.disabled = false;
      if (isAuthError(exc)) {
        signOut();
        showError(authMessage(exc));
      } else {
        showError(`Could not revoke ${keyId}: ${describe(exc)}`);
      }
    }
  }

  function clearTables() {
    for (const table of document.querySelectorAll("#dashboard table")) {
      table.tBodies[0].replaceChildren();
    }
  }

  function showSignedIn() {
    $("login-form").hidden = true;
    $("dashboard").hidden = false;
    $("logout").hidden = false;
    $("refresh").hidden = false;
  }

  function signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
    clearTables();
    $("dashboard").hidden = true;
    $("logout").hidden = true;
    $("refresh").hidden = true;
    $("login-form").hidden = false;
    setStatus("");
  }

  function onLogin(event) {
    event.preventDefault();
    const input = $("admin-token");
    const value = input.value.trim();
    input.value = "";
    if (!value) {
      showError("Enter the admin token.");
      input.focus();
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, value);
    showError("");
    loadAll();
  }

  function onLogout() {
    signOut();
    showError("");
    setStatus("Signed out.");
    $("admin-token").focus();
  }

  function start() {
    $("login-form").addEventListener("submit", onLogin);
    $("logout").addEventListener("click", onLogout);
    $("refresh").addEventListener("click", () => loadAll());
    $("task-status").addEventListener("change", () => run([loadTasks]));
    $("keys").addEventListener("click", (event) => {
      const button = event.target.closest("button.revoke");
      if (button) revoke(button);
    });
    if (token()) {
      loadAll();
    } else {
      signOut();
      $("admin-token").focus();
    }
  }

  document.addEventListener("DOMContentLoaded", start);
})();
