// Interactive scenes (OPENMAIC-COURSE-FORMAT §3.5, §8.9): the scene's HTML runs in an iframe's `srcdoc` with
// `sandbox="allow-scripts allow-forms allow-popups"` and deliberately no `allow-same-origin` (an opaque origin:
// no cookies, storage or DOM of this page). A Content-Security-Policy meta put first in its head forbids any
// network (no fetch, script, image or frame from anywhere; inline code, styles and data:/blob: pictures only),
// an in-memory storage shim stands in for localStorage/sessionStorage, and html/body fill the frame. The frame is
// laid over the canvas, sized to it. Widget actions post it one message each (§4.7).

import { h } from "./util.js";

export const FRAME_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
  "img-src data: blob:; media-src data: blob:; font-src data:; form-action 'none'";

const SHIM = `<script>(function(){function S(){var d={};return{getItem:function(k){return k in d?d[k]:null},` +
  `setItem:function(k,v){d[k]=String(v)},removeItem:function(k){delete d[k]},clear:function(){d={}},` +
  `key:function(i){return Object.keys(d)[i]||null},get length(){return Object.keys(d).length}}}` +
  `try{Object.defineProperty(window,'localStorage',{value:S()});Object.defineProperty(window,'sessionStorage',` +
  `{value:S()})}catch(e){}})();</script>`;
const FILL = "<style>html,body{width:100%;min-height:100%;margin:0;overflow-y:auto}</style>";

/** The scene's document with the policy, the storage shim and the fill CSS put first in its head. */
export function patchHtml(html) {
  const head = `<meta http-equiv="Content-Security-Policy" content="${FRAME_CSP}">${SHIM}${FILL}`;
  const doc = String(html || "");
  if (/<head[^>]*>/i.test(doc)) return doc.replace(/<head[^>]*>/i, (m) => `${m}${head}`);
  if (/<html[^>]*>/i.test(doc)) return doc.replace(/<html[^>]*>/i, (m) => `${m}<head>${head}</head>`);
  return `<!DOCTYPE html><html><head>${head}</head><body>${doc}</body></html>`;
}

const MESSAGE = {
  widget_highlight: "HIGHLIGHT_ELEMENT",
  widget_setState: "SET_WIDGET_STATE",
  widget_annotation: "ANNOTATE_ELEMENT",
  widget_reveal: "REVEAL_ELEMENT",
};

/** The message a widget action posts (§4.7). */
export function widgetMessage(a) {
  const msg = { type: MESSAGE[a.type] };
  if (a.target !== undefined) msg.target = a.target;
  if (a.type === "widget_setState") msg.state = a.state || {};
  if (a.content !== undefined) msg.content = a.content;
  return msg;
}

/** An iframe for an interactive scene, titled `title`; `post(action)` delivers a widget action. */
export function interactiveFrame(content, title) {
  const frame = h("iframe", {
    class: "interactive-frame", title, sandbox: "allow-scripts allow-forms allow-popups", referrerpolicy: "no-referrer",
  });
  if (content?.html) frame.srcdoc = patchHtml(content.html);
  else if (content?.url) frame.src = content.url;
  return {
    frame,
    post(a) {
      // The frame's origin is opaque, so no target origin can name it; only that window gets the message.
      frame.contentWindow?.postMessage(widgetMessage(a), "*");
    },
  };
}
