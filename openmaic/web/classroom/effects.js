// Spotlight and laser over the slide (OPENMAIC-COURSE-FORMAT §8.3): the spotlight dims the frame except a rounded
// cut-out around the element's box (thin white outline); the laser dot flies in from the frame's nearest corner
// to the element's centre and pulses. Both are fire-and-forget: they are cleared 5 s after the latest one, at
// every scene start, on stop, and when a discussion ends. A missing element shows nothing.

import { h } from "./util.js";

export const CLEAR_AFTER_MS = 5000;
const PAD = 6; // design-free padding of the cut-out around the element, in frame pixels

export function createEffects(canvas) {
  const layer = h("div", { class: "effects", "aria-hidden": "true" });
  canvas.overlays.append(layer);
  let timer = null;

  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(api.clear, CLEAR_AFTER_MS);
  };

  const api = {
    layer,
    clear() {
      clearTimeout(timer);
      layer.replaceChildren();
    },
    spotlight(elementId, dimOpacity = 0.5) {
      const box = canvas.box(elementId);
      layer.querySelector(".spotlight")?.remove();
      if (!box) return false;
      const hole = h("div", { class: "spotlight", dataset: { elementId } });
      Object.assign(hole.style, {
        left: `${box.left - PAD}px`, top: `${box.top - PAD}px`,
        width: `${box.width + 2 * PAD}px`, height: `${box.height + 2 * PAD}px`,
      });
      hole.style.setProperty("--dim", String(dimOpacity ?? 0.5));
      layer.append(hole);
      later();
      return true;
    },
    laser(elementId, color = "#ff0000") {
      const box = canvas.box(elementId);
      layer.querySelector(".laser")?.remove();
      if (!box || !box.height) return false;
      const frame = canvas.frame;
      const cx = box.left + box.width / 2;
      const cy = box.top + box.height / 2;
      const fromX = cx < frame.clientWidth / 2 ? -20 : frame.clientWidth + 20;
      const fromY = cy < frame.clientHeight / 2 ? -20 : frame.clientHeight + 20;
      const dot = h("div", { class: "laser", dataset: { elementId } });
      dot.style.setProperty("--laser", color || "#ff0000");
      Object.assign(dot.style, { left: `${fromX}px`, top: `${fromY}px` });
      layer.append(dot);
      requestAnimationFrame(() => requestAnimationFrame(() => {
        Object.assign(dot.style, { left: `${cx}px`, top: `${cy}px` });
      }));
      later();
      return true;
    },
  };
  return api;
}
