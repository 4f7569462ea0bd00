// The key form's fields and the admin API's key fields, both ways: what a create sends, what
// an edit changes (only the fields that differ; an emptied field is null, which removes the
// limit), and the form filled from a Key object. Values are checked by the API, which names the
// field it refuses; the page only reads what was typed.

import { $ } from "./dom.js";

const FIELDS = {
  name: "key-name",
  models: "key-models",
  budget: "key-budget",
  period: "key-period",
  expires_at: "key-expires",
  requests_per_minute: "key-rpm",
  tokens_per_minute: "key-tpm",
  metadata: "key-metadata",
};

const text = (name) => $(FIELDS[name]).value.trim();

// A whole number as a number; anything else as typed, for the API to refuse by name.
function count(value) {
  if (!value) return null;
  return /^\d+$/.test(value) ? Number(value) : value;
}

export class FormError extends Error {}

// "team=search" a line -> {team: "search"}; null when there is no line.
function metadata(value) {
  const pairs = {};
  const lines = value.split("\n").map((line) => line.trim()).filter(Boolean);
  for (const [index, line] of lines.entries()) {
    const at = line.indexOf("=");
    if (at < 1) {
      throw new FormError(`metadata: line ${index + 1} is not name=value`);
    }
    pairs[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return lines.length ? pairs : null;
}

// The key fields as the form holds them, in the API's terms (null: not set).
export function readFields() {
  const models = text("models").split(/[\s,]+/).filter(Boolean);
  const credits = text("budget");
  return {
    name: text("name") || null,
    models: models.length ? models : null,
    budget: credits ? { credits, period: $(FIELDS.period).value } : null,
    expires_at: text("expires_at") || null,
    requests_per_minute: count(text("requests_per_minute")),
    tokens_per_minute: count(text("tokens_per_minute")),
    metadata: metadata($(FIELDS.metadata).value),
  };
}

// The same fields of a Key object the API returned.
export function keyFields(key) {
  const models = Array.isArray(key.models) && !(key.models.length === 1 && key.models[0] === "*")
    ? key.models
    : null;
  const pairs = key.metadata && Object.keys(key.metadata).length ? key.metadata : null;
  return {
    name: key.name || null,
    models,
    budget: key.budget ? { credits: key.budget.credits, period: key.budget.period } : null,
    expires_at: key.expires_at || null,
    requests_per_minute: key.requests_per_minute ?? null,
    tokens_per_minute: key.tokens_per_minute ?? null,
    metadata: pairs,
  };
}

// A create's body: the tenant and every field that is set.
export function createBody(tenant, fields) {
  const body = { tenant };
  for (const [name, value] of Object.entries(fields)) {
    if (value !== null) body[name] = value;
  }
  return body;
}

// A PATCH's body: the fields that differ from the key's (null removes one).
export function changes(before, after) {
  const body = {};
  for (const [name, value] of Object.entries(after)) {
    if (JSON.stringify(value) !== JSON.stringify(before[name])) body[name] = value;
  }
  return body;
}

export function fillForm(key) {
  const fields = key ? keyFields(key) : null;
  $("key-tenant").value = key ? key.tenant : "";
  $(FIELDS.name).value = fields?.name ?? "";
  $(FIELDS.models).value = fields?.models ? fields.models.join(", ") : "";
  $(FIELDS.budget).value = fields?.budget ? fields.budget.credits : "";
  $(FIELDS.period).value = fields?.budget ? fields.budget.period : "month";
  $(FIELDS.expires_at).value = fields?.expires_at ?? "";
  $(FIELDS.requests_per_minute).value = fields?.requests_per_minute ?? "";
  $(FIELDS.tokens_per_minute).value = fields?.tokens_per_minute ?? "";
  $(FIELDS.metadata).value = fields?.metadata
    ? Object.entries(fields.metadata).map(([name, value]) => `${name}=${value}`).join("\n")
    : "";
}
