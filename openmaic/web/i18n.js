// The workbench's words in English and Chinese (zh-CN), as OpenMAIC ships them. The English sentence is the key:
// a sentence without a translation shows in English rather than as a code. The language follows the browser
// until the teacher picks one (kept in this browser); dates, numbers and plurals follow it through Intl.

import { ZH } from "./i18n_zh.js";

export const LANGUAGES = [["en", "English"], ["zh-CN", "中文"]];
const KEY = "openmaic.lang";

function stored() {
  try {
    return localStorage.getItem(KEY);
  } catch {
    return null;
  }
}

function fromBrowser() {
  for (const l of navigator.languages || [navigator.language || "en"]) {
    if (/^zh\b/i.test(l)) return "zh-CN";
    if (/^en\b/i.test(l)) return "en";
  }
  return "en";
}

let current = LANGUAGES.some(([l]) => l === stored()) ? stored() : fromBrowser();

export function language() {
  return current;
}

export function setLanguage(lang) {
  current = lang;
  try {
    localStorage.setItem(KEY, lang);
  } catch {
    // storage disabled: the choice lasts for this page only
  }
}

function format(text, params) {
  return text.replace(/\{(\w+)\}/g, (m, k) => (params && k in params ? (typeof params[k] === "number" ? number(params[k]) : params[k]) : m));
}

/** `text` in the current language, with `{name}` filled from `params`. */
export function t(text, params) {
  return format(current === "zh-CN" && ZH[text] ? ZH[text] : text, params);
}

/** The singular or plural sentence for `count` (Intl.PluralRules), `{count}` filled in. */
export function tn(count, one, other, params = {}) {
  const rule = new Intl.PluralRules(current).select(count);
  return t(rule === "one" ? one : other, { ...params, count });
}

export function number(n) {
  return new Intl.NumberFormat(current).format(n);
}

export function dateTime(value) {
  const d = value instanceof Date ? value : new Date(value);
  return new Intl.DateTimeFormat(current, { dateStyle: "medium", timeStyle: "short" }).format(d);
}

/** "3 minutes ago" and the like. */
export function ago(value) {
  const seconds = Math.round((new Date(value).getTime() - Date.now()) / 1000);
  const rtf = new Intl.RelativeTimeFormat(current, { numeric: "auto" });
  const abs = Math.abs(seconds);
  if (abs < 60) return rtf.format(seconds, "second");
  if (abs < 3600) return rtf.format(Math.round(seconds / 60), "minute");
  if (abs < 86400) return rtf.format(Math.round(seconds / 3600), "hour");
  return rtf.format(Math.round(seconds / 86400), "day");
}

/** Translate the static page around the views (elements marked data-i18n) and set its language. */
export function translatePage(root = document) {
  document.documentElement.lang = current;
  for (const el of root.querySelectorAll("[data-i18n]")) {
    el.dataset.i18n ||= el.textContent.trim();
    el.textContent = t(el.dataset.i18n);
  }
}
