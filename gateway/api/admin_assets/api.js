// The admin API as the page calls it: the token from this tab's sessionStorage, JSON in and
// out, and the gateway's error envelope turned into an ApiError that says what went wrong.

export const TOKEN_KEY = "gateway.adminToken";
const API = "/admin/v1";
const ENABLE_HINT =
  "To enable it, run `gateway admin token` once: keep the gwadm- token it prints, set the " +
  "GATEWAY_ADMIN_TOKEN_HASH=sha256:... line it prints in the gateway's environment, and " +
  "restart the gateway.";

export class ApiError extends Error {
  constructor(status, code, message, details = [], requestId = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
    this.requestId = requestId;
  }
}

export const token = () => sessionStorage.getItem(TOKEN_KEY);

// `?a=1&b=2` from the values that are set (an empty or null value is left out).
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(name, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export async function api(path, { method = "GET", body, headers = {} } = {}) {
  const init = {
    method,
    headers: { Authorization: `Bearer ${token() || ""}`, Accept: "application/json", ...headers },
    cache: "no-store",
    credentials: "omit",
    redirect: "error",
  };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(API + path, init);
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
      Array.isArray(error.details) ? error.details : [],
      error.request_id || response.headers.get("x-request-id"),
    );
  }
  return payload;
}

export const isAuthError = (exc) =>
  exc instanceof ApiError && (exc.status === 401 || exc.status === 403);

// One line per problem: the message, its code and status, each field the API named, and the
// request id to find the log line by.
export function describe(exc) {
  if (!(exc instanceof ApiError)) {
    return `The page could not show an answer: ${exc && exc.message ? exc.message : exc}`;
  }
  if (!exc.status) return exc.message;
  const lines = [`${exc.message} (${exc.code}, HTTP ${exc.status})`];
  for (const detail of exc.details) {
    if (detail && detail.field) lines.push(`${detail.field}: ${detail.message}`);
  }
  if (exc.requestId) lines.push(`request ${exc.requestId}`);
  return lines.join("\n");
}

export function authMessage(exc) {
  if (exc.code === "admin_disabled") {
    return `The admin API is disabled on this gateway (${exc.code}, HTTP ${exc.status}). ${ENABLE_HINT}`;
  }
  if (exc.status === 401) {
    return `The admin token was refused: ${exc.message} (${exc.code}, HTTP 401). ` +
      "Check the token and sign in again.";
  }
  return `Access denied: ${exc.message} (${exc.code}, HTTP ${exc.status}).`;
}

let onAuthFailure = () => {};

// What the page does when a call is refused for the token (it signs out): set once at start.
export function whenTokenRefused(handler) {
  onAuthFailure = handler;
}

// Shows a failed call in `box` (an element with role=alert), after `what` failed; a refused
// token signs the page out instead.
export function report(exc, what, box) {
  if (isAuthError(exc)) {
    onAuthFailure(exc);
    return;
  }
  box.textContent = `${what}: ${describe(exc)}`;
  box.hidden = false;
}
