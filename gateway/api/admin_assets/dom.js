// Building the page's tables and controls from API values: text only. Every value reaches the
// page through textContent or an attribute, never as HTML, so a tenant id or a key's name
// that holds markup shows as text (the CSP also refuses inline script and HTML sinks).

export const $ = (id) => document.getElementById(id);

export const NUM = "num";

export function cell(value, className) {
  const td = document.createElement("td");
  td.textContent = value === null || value === undefined ? "" : String(value);
  if (className) td.className = className;
  return td;
}

export function row(cells) {
  const tr = document.createElement("tr");
  tr.append(...cells);
  return tr;
}

export function fill(tableId, items, toRow, emptyText) {
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
export function shortTime(value) {
  const match = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(value || "");
  if (!match) return value;
  return `${match[1]} ${match[2]} ${match[3] === "Z" || match[3] === "+00:00" ? "UTC" : match[3]}`;
}

// `compact`: to the minute, for wide tables ("2026-11-23 19:39").
export function timeCell(value, compact = false) {
  const text = shortTime(value);
  const td = cell(compact && text ? text.slice(0, 16) : text, "time");
  if (value) td.title = value;
  return td;
}

export const list = (values) => (Array.isArray(values) ? values.join(", ") : values);

// A button that carries its data in data-* attributes (read back by the table's listener).
export function button(text, className, label, data) {
  const element = document.createElement("button");
  element.type = "button";
  element.className = className;
  element.textContent = text;
  element.setAttribute("aria-label", label);
  Object.assign(element.dataset, data);
  return element;
}

export function hide(box) {
  box.textContent = "";
  box.hidden = true;
}

// A class name made of a value from the API: only the characters a state name has.
export const token = (value) => String(value).replace(/[^a-z_]/g, "");
