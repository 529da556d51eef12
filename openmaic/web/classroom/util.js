// Small helpers every module of the classroom player shares: building DOM and SVG nodes, and resolving a media
// reference of the course document (OPENMAIC-COURSE-FORMAT §5.1) to something a browser can load.

export const SVG_NS = "http://www.w3.org/2000/svg";

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

/** An HTML element: `attrs` are attributes, `on*` functions listeners, `class`, `dataset`, `style` (an object). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
    else if (k in el && typeof v !== "string") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

/** An SVG element with its attributes. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== false) el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Assets carried inside the page itself (the offline export): asset id -> data URL. */
const embedded = (() => {
  const node = typeof document !== "undefined" && document.getElementById("classroom-assets");
  try {
    return node ? JSON.parse(node.textContent) : {};
  } catch {
    return {};
  }
})();

/** Where an asset id of this server is served (or its bytes, in an exported page). */
export function assetUrl(id) {
  return embedded[id] || `/api/assets/${encodeURIComponent(id)}`;
}

const CONCRETE = /^(https?:|data:|blob:|\/|\.\.?\/)/i;
const PLACEHOLDER = /^gen_(img|vid)_[A-Za-z0-9_-]+$/i;

/** A loadable URL for a media slot, or null for a placeholder (a skeleton is drawn instead). */
export function mediaUrl(ref) {
  if (!ref || typeof ref !== "string") return null;
  if (embedded[ref]) return embedded[ref];
  if (/^\/api\/assets\//.test(ref)) {
    const id = decodeURIComponent(ref.slice("/api/assets/".length));
    return embedded[id] || ref;
  }
  if (CONCRETE.test(ref)) return ref; // never a script address: the pattern names the schemes it takes
  if (PLACEHOLDER.test(ref)) return null;
  if (/^(ast|asset)_[A-Za-z0-9]+$/.test(ref)) return assetUrl(ref);
  if (/^[\w.-]+\/[\w./-]+$/.test(ref)) return ref; // media/x.png: a relative address
  return null;
}

export const isPlaceholder = (ref) => typeof ref === "string" && PLACEHOLDER.test(ref);

/** Share of CJK characters in `text` (0..1). */
export function cjkShare(text) {
  const chars = [...(text || "").replace(/\s/g, "")];
  if (!chars.length) return 0;
  const cjk = chars.filter((c) => /[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]/.test(c)).length;
  return cjk / chars.length;
}

/** A promise resolved after `ms`, early (with false) when `signal` aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const t = setTimeout(() => resolve(true), ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      resolve(false);
    }, { once: true });
  });
}

/** The headers that say who is asking: the access token the workbench stored, when it signed in with one. */
export function authHeaders() {
  try {
    const token = localStorage.getItem("openmaic.token");
    return token ? { Authorization: `Bearer ${token}` } : {};
  } catch {
    return {};
  }
}

/** A scene's script: its actions that are objects with a type (anything else in a document is passed over). */
export function actionsOf(scene) {
  const list = scene?.actions;
  return Array.isArray(list) ? list.filter((a) => a && typeof a === "object" && typeof a.type === "string") : [];
}
