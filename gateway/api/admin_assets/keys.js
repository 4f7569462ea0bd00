// The keys section: the paged table of keys with their limits and spend, the form that creates
// or edits a key, rotation with a grace period, revocation, and the panel that shows a new
// secret once (the gateway keeps only its hash; the page keeps it nowhere but that panel).

import { api, query, report } from "./api.js";
import { $, NUM, button, cell, fill, hide, list, row, shortTime, timeCell } from "./dom.js";
import { FormError, changes, createBody, fillForm, keyFields, readFields } from "./key_form.js";
import { Pager } from "./pager.js";

export const PAGE_SIZE = 20;

const shown = new Map(); // the keys of the page on screen, by id
let editing = null; // the key being edited; null while the form creates one
let rotating = null;
let pager = null;
let changed = async () => {};

// ---- the table ------------------------------------------------------------------------------

function stateOf(key) {
  if (key.revoked_at) return ["revoked", `revoked ${shortTime(key.revoked_at)}`];
  if (key.expires_at && Date.parse(key.expires_at) <= Date.now()) {
    return ["expired", `expired ${shortTime(key.expires_at)}`];
  }
  return ["active", "active"];
}

function limitsText(key) {
  const parts = [];
  if (key.requests_per_minute != null) parts.push(`${key.requests_per_minute} req/min`);
  if (key.tokens_per_minute != null) parts.push(`${key.tokens_per_minute} tok/min`);
  return parts.join(", ");
}

function metadataText(key) {
  return Object.entries(key.metadata || {}).map(([name, value]) => `${name}=${value}`).join(", ");
}

function actions(key, active) {
  const td = document.createElement("td");
  td.className = "actions";
  if (!active) return td;
  const data = { keyId: key.id, tenant: key.tenant };
  td.append(
    button("Edit", "edit", `Edit key ${key.id}`, data),
    button("Rotate", "rotate", `Rotate key ${key.id}`, data),
    button("Revoke", "revoke", `Revoke key ${key.id}`, data),
  );
  return td;
}

export function keyRow(key) {
  const [state, stateText] = stateOf(key);
  const budget = key.budget;
  const fields = keyFields(key);
  const tr = row([
    cell(key.id, "mono key-id"),
    cell(key.tenant),
    cell(key.name),
    cell(key.prefix, "mono"),
    cell(fields.models ? list(fields.models) : "the tenant's"),
    cell(budget ? `${budget.credits} / ${budget.period}` : "none", NUM),
    cell(budget ? budget.spent : "", NUM),
    cell(budget ? budget.remaining : "", NUM),
    budget && budget.resets_at ? timeCell(budget.resets_at, true) : cell(budget ? "never" : ""),
    timeCell(key.expires_at, true),
    cell(limitsText(key), "small"),
    cell(metadataText(key), "small"),
    timeCell(key.last_used_at, true),
    timeCell(key.created_at, true),
    cell(stateText, `state state-${state}`),
    actions(key, state === "active"),
  ]);
  tr.dataset.keyId = key.id;
  if (state !== "active") tr.classList.add("revoked");
  return tr;
}

export async function loadKeys() {
  const filters = { tenant: $("keys-tenant").value.trim(), prefix: $("keys-prefix").value.trim() };
  const page = await api(`/keys${query({ ...filters, limit: PAGE_SIZE, after: pager.after })}`);
  if (!pager.update(page)) return loadKeys();
  shown.clear();
  for (const key of page.data) shown.set(key.id, key);
  const filtered = filters.tenant || filters.prefix;
  fill("keys", page.data, keyRow, filtered ? "No key matches." : "No keys.");
}

// ---- the secret, shown once -------------------------------------------------------------------

function showSecret(title, key) {
  $("secret-title").textContent = title;
  $("secret-value").textContent = key.key;
  $("secret-key-id").textContent = key.id;
  $("secret-panel").hidden = false;
  $("secret-value").focus();
}

export function forgetSecret() {
  $("secret-value").textContent = "";
  $("secret-panel").hidden = true;
}

async function copySecret() {
  const value = $("secret-value");
  try {
    await navigator.clipboard.writeText(value.textContent);
    $("secret-copied").textContent = "Copied.";
  } catch {
    // No clipboard outside a secure context: select the text for the keyboard's copy.
    window.getSelection().selectAllChildren(value);
    $("secret-copied").textContent = "Selected: press Ctrl+C (⌘C) to copy.";
  }
}

// ---- create and edit ----------------------------------------------------------------------------

function openForm(key) {
  editing = key;
  closeRotate();
  fillForm(key);
  hide($("key-form-error"));
  $("key-tenant").disabled = Boolean(key);
  $("key-form-title").textContent = key ? `Edit key ${key.id} (${key.tenant})` : "New key";
  $("key-save").textContent = key ? "Save changes" : "Create key";
  $("key-form").hidden = false;
  (key ? $("key-name") : $("key-tenant")).focus();
}

export function closeForm() {
  editing = null;
  $("key-form").hidden = true;
}

async function submitForm(event) {
  event.preventDefault();
  const box = $("key-form-error");
  hide(box);
  let fields;
  try {
    fields = readFields();
  } catch (exc) {
    if (!(exc instanceof FormError)) throw exc;
    box.textContent = exc.message;
    box.hidden = false;
    return;
  }
  const save = $("key-save");
  save.disabled = true;
  try {
    if (editing) {
      const body = changes(keyFields(editing), fields);
      if (!Object.keys(body).length) {
        box.textContent = "Nothing to save: no field changed.";
        box.hidden = false;
        return;
      }
      const id = editing.id;
      await api(`/keys/${encodeURIComponent(id)}`, { method: "PATCH", body });
      closeForm();
      $("status").textContent = `Key ${id} saved.`;
    } else {
      const tenant = $("key-tenant").value.trim();
      const key = await api("/keys", { method: "POST", body: createBody(tenant, fields) });
      closeForm();
      showSecret(`New key ${key.id} for tenant ${key.tenant}`, key);
      $("status").textContent = `Key ${key.id} created.`;
    }
    await Promise.all([loadKeys(), changed()]);
  } catch (exc) {
    report(exc, editing ? `Could not save ${editing.id}` : "Could not create the key", box);
  } finally {
    save.disabled = false;
  }
}

// ---- rotate and revoke ---------------------------------------------------------------------------

function openRotate(key) {
  closeForm();
  rotating = key;
  hide($("rotate-error"));
  $("rotate-title").textContent = `Rotate key ${key.id} (${key.tenant})`;
  $("rotate-panel").hidden = false;
  $("rotate-grace").focus();
}

export function closeRotate() {
  rotating = null;
  $("rotate-panel").hidden = true;
}

async function submitRotate(event) {
  event.preventDefault();
  const box = $("rotate-error");
  hide(box);
  const grace = $("rotate-grace").value.trim();
  const body = { grace_seconds: /^\d+$/.test(grace) ? Number(grace) : grace };
  const id = rotating.id;
  $("rotate-confirm").disabled = true;
  try {
    const key = await api(`/keys/${encodeURIComponent(id)}/rotate`, { method: "POST", body });
    closeRotate();
    showSecret(`New secret for key ${key.id} (the old one works for ${grace} s more)`, key);
    $("status").textContent = `Key ${id} rotated.`;
    await loadKeys();
  } catch (exc) {
    report(exc, `Could not rotate ${id}`, box);
  } finally {
    $("rotate-confirm").disabled = false;
  }
}

async function revoke(control) {
  const { keyId, tenant } = control.dataset;
  if (!window.confirm(`Revoke key ${keyId} of tenant ${tenant}? Calls with it are refused at once.`)) {
    return;
  }
  control.disabled = true;
  try {
    const key = await api(`/keys/${encodeURIComponent(keyId)}/revoke`, { method: "POST" });
    shown.set(key.id, key);
    control.closest("tr").replaceWith(keyRow(key));
    $("status").textContent = `Key ${keyId} revoked.`;
    await changed();
  } catch (exc) {
    control.disabled = false;
    report(exc, `Could not revoke ${keyId}`, $("error"));
  }
}

function onTableClick(event) {
  const control = event.target.closest("button");
  if (!control) return;
  const key = shown.get(control.dataset.keyId);
  if (control.classList.contains("revoke")) revoke(control);
  else if (control.classList.contains("edit") && key) openForm(key);
  else if (control.classList.contains("rotate") && key) openRotate(key);
}

// Wires the section; `onChanged` runs after a key is made or revoked (the tenants' key counts).
export function initKeys(onChanged, onFailure) {
  changed = onChanged;
  pager = new Pager($("keys-pager"), () => loadKeys().catch(onFailure));
  $("new-key").addEventListener("click", () => openForm(null));
  $("key-form").addEventListener("submit", submitForm);
  $("key-cancel").addEventListener("click", closeForm);
  $("rotate-form").addEventListener("submit", submitRotate);
  $("rotate-cancel").addEventListener("click", closeRotate);
  $("secret-copy").addEventListener("click", copySecret);
  $("secret-done").addEventListener("click", forgetSecret);
  $("keys").addEventListener("click", onTableClick);
  $("keys-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    hide($("error")); // what an earlier filter was refused for
    pager.reset();
    loadKeys().catch(onFailure);
  });
}
