// The admin page: signs in with the admin token (kept in this tab's sessionStorage only) and
// shows and changes what /admin/v1 holds. This module wires the page; keys.js and credits.js
// are the sections that write; every list pages through the API's `limit` and `after`.

import { TOKEN_KEY, api, authMessage, describe, isAuthError, query, token, whenTokenRefused }
  from "./api.js";
import { clearCredits, chooseTenant, initCredits, loadLedger } from "./credits.js";
import { $, NUM, button, cell, fill, list, row, shortTime, timeCell, token as stateName }
  from "./dom.js";
import { closeForm, closeRotate, forgetSecret, initKeys, loadKeys } from "./keys.js";
import { Pager } from "./pager.js";

const PAGE_SIZE = 20;
let tenantPager = null;
let spendPager = null;
let taskPager = null;

function showError(text) {
  const box = $("error");
  box.textContent = text;
  box.hidden = !text;
}

function setStatus(text) {
  $("status").textContent = text;
}

// ---- rendering: text only -------------------------------------------------------------

function tenantRow(tenant) {
  const keys = tenant.keys || {};
  const credits = document.createElement("td");
  credits.append(
    button("Credits…", "credits", `Grant or adjust credits of tenant ${tenant.id}`, {
      tenant: tenant.id,
    }),
  );
  const tr = row([
    cell(tenant.id),
    cell(tenant.balance, NUM),
    cell(tenant.held, NUM),
    cell(list(tenant.models)),
    cell(tenant.requests_per_minute, NUM),
    cell(tenant.tokens_per_minute, NUM),
    cell(keys.active, NUM),
    cell(keys.revoked, NUM),
    credits,
  ]);
  tr.dataset.tenant = tenant.id;
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
  const tr = row([
    cell(task.id, "mono"),
    cell(task.tenant),
    cell(task.capability),
    cell(task.model),
    cell(task.status, `status status-${stateName(task.status)}`),
    cell(progressText(task.progress), NUM),
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
    cell(item.status, `status status-${stateName(item.status)}`),
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
  return row([cell(breaker.provider), cell(state, `state state-${stateName(state)}`)]);
}

// ---- loading --------------------------------------------------------------------------

async function loadTenants() {
  const page = await api(`/tenants${query({ limit: PAGE_SIZE, after: tenantPager.after })}`);
  if (!tenantPager.update(page)) return loadTenants();
  fill("tenants", page.data, tenantRow, "No tenants.");
  const names = page.data.map((tenant) => {
    const option = document.createElement("option");
    option.value = tenant.id;
    return option;
  });
  $("tenant-names").replaceChildren(...names);
}

async function loadSpend() {
  const usage = await api(`/usage${query({ limit: PAGE_SIZE, after: spendPager.after })}`);
  if (!spendPager.update(usage)) return loadSpend();
  $("spend-caption").textContent =
    `From ${shortTime(usage.from)} to ${shortTime(usage.to)}; days are UTC days.`;
  fill("spend", usage.data, spendRow, "No spend in this range.");
}

async function loadTasks() {
  const status = $("task-status").value;
  const page = await api(`/tasks${query({ status, limit: PAGE_SIZE, after: taskPager.after })}`);
  if (!taskPager.update(page)) return loadTasks();
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
    refused(auth);
    return false;
  }
  showError(failures.map(describe).join("\n"));
  return true;
}

async function loadAll() {
  setStatus("Loading…");
  const ok = await run([
    loadTenants, loadKeys, loadLedger, loadSpend, loadTasks, loadCallbacks, loadRouting,
  ]);
  if (ok) {
    showSignedIn();
    setStatus(`Updated ${new Date().toLocaleTimeString()}`);
  }
}

// A list that failed to load on its own (a page of it): its error goes to #error.
function loadFailed(exc) {
  if (isAuthError(exc)) refused(exc);
  else showError(describe(exc));
}

// ---- signing in and out ---------------------------------------------------------------

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
  forgetSecret();
  closeForm();
  closeRotate();
  clearCredits();
  clearTables();
  $("dashboard").hidden = true;
  $("logout").hidden = true;
  $("refresh").hidden = true;
  $("login-form").hidden = false;
  setStatus("");
}

function refused(exc) {
  signOut();
  showError(authMessage(exc));
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
  whenTokenRefused(refused);
  tenantPager = new Pager($("tenants-pager"), () => loadTenants().catch(loadFailed));
  spendPager = new Pager($("spend-pager"), () => loadSpend().catch(loadFailed));
  taskPager = new Pager($("tasks-pager"), () => loadTasks().catch(loadFailed));
  const tenantsChanged = () => loadTenants().catch(loadFailed);
  initKeys(tenantsChanged, loadFailed);
  initCredits(tenantsChanged, loadFailed);
  $("login-form").addEventListener("submit", onLogin);
  $("logout").addEventListener("click", onLogout);
  $("refresh").addEventListener("click", () => loadAll());
  $("task-status").addEventListener("change", () => {
    taskPager.reset();
    run([loadTasks]);
  });
  $("tenants").addEventListener("click", (event) => {
    const control = event.target.closest("button.credits");
    if (control) chooseTenant(control.dataset.tenant).catch(loadFailed);
  });
  if (token()) {
    loadAll();
  } else {
    signOut();
    $("admin-token").focus();
  }
}

start();
