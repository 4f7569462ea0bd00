// The credits section: grant or adjust a tenant's credits in two steps (review shows the
// tenant's balance now and after, and nothing moves until "Confirm"), and the tenant's ledger,
// paged. Each reviewed operation gets its own entry id, kept until the API confirms it: a
// retry after a lost answer (504 outcome_unknown, no answer) reuses it, so it applies once.

import { api, query, report } from "./api.js";
import { $, NUM, cell, fill, hide, row, timeCell } from "./dom.js";
import { Pager } from "./pager.js";

export const LEDGER_PAGE_SIZE = 20;

let pending = null; // the operation under review: {tenant, kind, amount, reason, id}
let ledgerTenant = null;
let pager = null;
let changed = async () => {};

// ---- money as the API writes it: four decimals, exact (BigInt units of 0.0001) ---------------

function units(text) {
  const match = /^([+-]?)(\d+)(?:\.(\d{1,4}))?$/.exec(text);
  if (!match) return null;
  const value = BigInt(match[2]) * 10000n + BigInt((match[3] || "").padEnd(4, "0"));
  return match[1] === "-" ? -value : value;
}

function credits(value) {
  const sign = value < 0n ? "-" : "";
  const magnitude = value < 0n ? -value : value;
  return `${sign}${magnitude / 10000n}.${String(magnitude % 10000n).padStart(4, "0")}`;
}

function entryId() {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `admin-page:${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

// ---- review and confirm --------------------------------------------------------------------

function readOperation() {
  return {
    tenant: $("credit-tenant").value.trim(),
    kind: $("credit-kind").value,
    amount: $("credit-amount").value.trim(),
    reason: $("credit-reason").value.trim(),
  };
}

const sameOperation = (a, b) =>
  a && b && a.tenant === b.tenant && a.kind === b.kind && a.amount === b.amount &&
  a.reason === b.reason;

function summary(operation, balance) {
  const amount = units(operation.amount);
  const verb = operation.kind === "grant" ? "Grant" : "Adjust by";
  const shownAmount = amount === null ? operation.amount : credits(amount);
  const before = balance === null ? null : units(balance);
  const after = before === null || amount === null ? "?" : credits(before + amount);
  return [
    `${verb} ${shownAmount} credits, tenant ${operation.tenant}.`,
    `Balance now ${balance ?? "?"}, after ${after}.`,
    `Reason: ${operation.reason}`,
    `Entry id: ${operation.id}`,
  ].join("\n");
}

async function review(event) {
  event.preventDefault();
  const box = $("credit-error");
  hide(box);
  hide($("credit-result"));
  const operation = readOperation();
  // The same operation reviewed again keeps its id: it may have been sent already.
  operation.id = sameOperation(pending, operation) ? pending.id : entryId();
  $("credit-review").disabled = true;
  try {
    const tenant = await api(`/tenants/${encodeURIComponent(operation.tenant)}`);
    pending = operation;
    $("credit-summary").textContent = summary(operation, tenant.balance);
    $("credit-confirm").textContent =
      operation.kind === "grant" ? "Confirm the grant" : "Confirm the adjustment";
    $("credit-form").hidden = true;
    $("credit-review-panel").hidden = false;
    $("credit-confirm").focus();
    await showLedger(operation.tenant);
  } catch (exc) {
    report(exc, "Could not review", box);
  } finally {
    $("credit-review").disabled = false;
  }
}

function back() {
  $("credit-review-panel").hidden = true;
  $("credit-form").hidden = false;
  $("credit-amount").focus();
}

// A lost answer may have been applied: the operation stays under review with its id.
const maybeApplied = (exc) => exc.status === 0 || exc.code === "outcome_unknown";

async function confirm() {
  const operation = pending;
  const box = $("credit-review-error");
  hide(box);
  const path = operation.kind === "grant" ? "grants" : "adjustments";
  const body = { amount: operation.amount, reason: operation.reason, id: operation.id };
  $("credit-confirm").disabled = true;
  try {
    const entry = await api(`/tenants/${encodeURIComponent(operation.tenant)}/${path}`, {
      method: "POST",
      body,
    });
    pending = null;
    $("credit-amount").value = "";
    $("credit-reason").value = "";
    $("credit-review-panel").hidden = true;
    $("credit-form").hidden = false;
    const result = $("credit-result");
    result.textContent = `${entry.kind === "grant" ? "Granted" : "Adjusted by"} ${entry.amount} ` +
      `credits, tenant ${entry.tenant}: balance ${entry.balance_after} (entry ${entry.id}).`;
    result.hidden = false;
    await Promise.all([showLedger(entry.tenant), changed()]);
  } catch (exc) {
    if (exc.status !== undefined && maybeApplied(exc)) {
      report(exc, "Not confirmed (it may have been applied; confirming again retries it with " +
        "the same id, which applies it at most once)", box);
      return;
    }
    pending = null;
    back();
    report(exc, "Refused", $("credit-error"));
  } finally {
    $("credit-confirm").disabled = false;
  }
}

// ---- the ledger -------------------------------------------------------------------------------

function ledgerRow(entry) {
  return row([
    timeCell(entry.created_at),
    cell(entry.kind),
    cell(entry.amount_credits, NUM),
    cell(entry.balance_after_credits, NUM),
    cell(entry.reason, "small"),
    cell(entry.id, "mono small"),
  ]);
}

export async function loadLedger() {
  if (ledgerTenant === null) return;
  const tenant = encodeURIComponent(ledgerTenant);
  const page = await api(
    `/tenants/${tenant}/ledger${query({ limit: LEDGER_PAGE_SIZE, after: pager.after })}`,
  );
  if (!pager.update(page)) return loadLedger();
  fill("ledger", page.data, ledgerRow, "No entries.");
}

// Shows a tenant's ledger from its newest entry.
export async function showLedger(tenant) {
  if (tenant !== ledgerTenant) pager.reset();
  ledgerTenant = tenant;
  $("ledger-tenant").textContent = tenant;
  $("ledger-section").hidden = false;
  await loadLedger();
}

// A tenant picked in the tenants table: the credit form and the ledger are for it.
export async function chooseTenant(tenant) {
  $("credit-tenant").value = tenant;
  if (!$("credit-review-panel").hidden) back();
  await showLedger(tenant);
  $("credit-amount").focus();
}

export function clearCredits() {
  pending = null;
  ledgerTenant = null;
  $("ledger-section").hidden = true;
  $("credit-review-panel").hidden = true;
  $("credit-form").hidden = false;
  hide($("credit-result"));
}

export function initCredits(onChanged, onFailure) {
  changed = onChanged;
  pager = new Pager($("ledger-pager"), () => loadLedger().catch(onFailure));
  $("credit-form").addEventListener("submit", review);
  $("credit-back").addEventListener("click", back);
  $("credit-confirm").addEventListener("click", confirm);
}
