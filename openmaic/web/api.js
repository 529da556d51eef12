// HTTP calls to the openmaic API, and small helpers shared by the views.

/** A fresh command id (UUID v4). Works on plain http too, where crypto.randomUUID may be missing. */
export function commandId() {
  if (globalThis.crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * An error answered by the API, from any of its forms: `{"success": false, "errorCode", "error", "details"}`,
 * `{"error": {"code", "message", "details"}}`, or a plain-text body such as `Not found`.
 */
export class ApiError extends Error {
  constructor(status, body, text = "") {
    const nested = body && typeof body.error === "object" ? body.error : null;
    const message = nested ? nested.message : typeof body?.error === "string" ? body.error : text.trim();
    super(message || `the server answered ${status}`);
    this.status = status;
    this.code = (nested ? nested.code : body?.errorCode) || "error";
    this.details = (nested ? nested.details : body?.details) || {};
  }
}

// -- access token (identity.mode token) -------------------------------------------------------------------------

const TOKEN_KEY = "openmaic.token";

/** The access token this browser signed in with, or null. */
export function accessToken() {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null; // storage disabled: no token can be kept
  }
}

export function setAccessToken(token) {
  localStorage.setItem(TOKEN_KEY, token);
}

export function clearAccessToken() {
  try {
    localStorage.removeItem(TOKEN_KEY);
  } catch {
    // nothing stored
  }
}

/** Dispatched on `window` when the server asks for a bearer token it was not given, or no longer accepts. */
export const SIGN_IN_NEEDED = "openmaic:sign-in-needed";

/** The headers that say who is asking: the access token, when this browser signed in with one. */
export function authHeaders() {
  const token = accessToken();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** A WebSocket to an API path. A browser cannot set headers on it, so an access token rides as a subprotocol. */
export function openSocket(path) {
  const token = accessToken();
  return token ? new WebSocket(wsUrl(path), ["openmaic", `bearer.${token}`]) : new WebSocket(wsUrl(path));
}

/** Call the API. `json` sends a JSON body, `form` a FormData (multipart). Answers the decoded JSON (or null). */
export async function api(method, path, { json, form } = {}) {
  const init = { method, headers: { Accept: "application/json", ...authHeaders() }, credentials: "same-origin" };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (form !== undefined) {
    init.body = form;
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, { errorCode: "NETWORK", error: "The server could not be reached. Check your connection and try again." });
  }
  const text = await response.text();
  let body = null;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
  }
  if (!response.ok) {
    const err = new ApiError(response.status, body, body === null ? text : "");
    if (response.status === 401 && (response.headers.get("WWW-Authenticate") || "").startsWith("Bearer")) {
      window.dispatchEvent(new CustomEvent(SIGN_IN_NEEDED, { detail: err }));
    }
    throw err;
  }
  return body;
}

/** A readable sentence for an error from `api` or a socket command. */
export function explain(err) {
  if (!err) return "Something went wrong.";
  const path = err.details?.path;
  const msg = err.message || String(err);
  return path && !msg.includes(path) ? `${msg} (${path})` : msg;
}

/** The WebSocket URL for an API path on this server. */
export function wsUrl(path) {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${location.host}${path}`;
}

/** Build a DOM element: h("p", {class: "x", onclick: fn}, "text", child…). Text is never parsed as HTML. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k in el && typeof v !== "string") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}
