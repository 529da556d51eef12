// Interactive scenes are model-written HTML pages, so each one runs in a frame that can reach nothing outside
// itself (the workbench and the classroom both show them this way).
//
// The frame's document is the server's `/scene-frame`: its own Content-Security-Policy allows no network at all
// (no fetch, beacon, WebSocket, image, font, form, frame or worker loads from anywhere) and sandboxes it; the
// `sandbox="allow-scripts"` attribute does too (an opaque origin: no cookies, storage or access to this page; no
// forms, popups, modals or top-level navigation). The pages that embed it allow frames from their own origin
// only, which stops the frame from navigating itself to another site. The scene's HTML is handed over with
// postMessage once the frame says it is ready, and the frame writes it into its own document, where that policy
// still holds.

import { h } from "./api.js";

export const SCENE_FRAME = "/scene-frame";

const scenes = new WeakMap(); // frame element -> the HTML it shows

window.addEventListener("message", (event) => {
  if (!event.source || event.data?.type !== "openmaic:frame-ready") return;
  for (const frame of document.querySelectorAll("iframe.scene-frame")) {
    if (frame.contentWindow !== event.source) continue;
    const html = scenes.get(frame);
    // The frame's origin is opaque, so no target origin can name it; only that window gets the message.
    if (html !== undefined) event.source.postMessage({ type: "openmaic:scene", html }, "*");
    return;
  }
});

/** A sandboxed frame showing `html`, labelled `title` for assistive technology. */
export function sceneFrame(html, title) {
  const frame = h("iframe", {
    class: "scene-frame", sandbox: "allow-scripts", src: SCENE_FRAME, title, referrerpolicy: "no-referrer",
  });
  scenes.set(frame, html);
  return frame;
}
