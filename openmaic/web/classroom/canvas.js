// The slide canvas (OPENMAIC-COURSE-FORMAT §8.1–§8.3): a frame fitted into its host without distortion, holding a
// background layer and a content layer of exactly the design size (1000 × 562.5) scaled from its top-left corner,
// so every coordinate of the document is a design pixel. Element n (from 1) sits in a full-canvas layer
// `slide-element-<id>` with z-index n; effects and the whiteboard lie above (effects.js, whiteboard.js).

import { drawElement, lineBox } from "./elements.js";
import { h, mediaUrl } from "./util.js";

export const VIEWPORT = 1000;
export const RATIO = 0.5625;

function backgroundCss(bg, theme) {
  if (!bg) return { background: theme?.backgroundColor || "#ffffff" };
  if (bg.type === "gradient" && bg.gradient) {
    const stops = (bg.gradient.colors || []).map((c) => `${c.color} ${c.pos}%`).join(", ");
    return { background: bg.gradient.type === "radial" ? `radial-gradient(${stops})`
      : `linear-gradient(${bg.gradient.rotate || 0}deg, ${stops})` };
  }
  if (bg.type === "image" && bg.image) {
    const url = mediaUrl(bg.image.src);
    if (!url) return { background: "#f3f4f6" };
    const size = bg.image.size || "cover";
    return {
      backgroundImage: `url("${url.replace(/"/g, "%22")}")`, backgroundColor: "#fff",
      backgroundSize: size === "repeat" ? "auto" : size, backgroundRepeat: size === "repeat" ? "repeat" : "no-repeat",
      backgroundPosition: "center",
    };
  }
  return { background: bg.color || "#ffffff" };
}

/** Place one element's content in its own layer, boxed and rotated about its centre. */
export function placeElement(el, index, ctx) {
  const content = drawElement(el, ctx);
  if (!content) return null;
  const box = h("div", { class: `el el-${el.type}-box`, dataset: { elementId: el.id, type: el.type } }, content);
  if (el.type === "line") {
    const lb = lineBox(el);
    Object.assign(box.style, { left: `${el.left}px`, top: `${el.top}px`, width: `${lb.width}px`,
      height: `${lb.height}px` });
  } else {
    Object.assign(box.style, {
      left: `${el.left}px`, top: `${el.top}px`, width: `${el.width}px`, height: `${el.height ?? 0}px`,
      transform: el.rotate ? `rotate(${el.rotate}deg)` : "",
    });
  }
  const layer = h("div", { class: "element-layer", id: `slide-element-${el.id}` }, box);
  layer.style.zIndex = String(index + 1);
  return layer;
}

/** Draw `elements` into `layer` (its previous children go). */
export function drawElements(layer, elements, ctx) {
  const list = Array.isArray(elements) ? elements : [];
  layer.replaceChildren(...list.map((el, i) => (el && typeof el === "object" && typeof el.id === "string"
    ? placeElement(el, i, ctx) : null)).filter(Boolean));
}

/**
 * A canvas in `host`: `draw(slide, ctx)` shows a slide (ctx: `{media}`, the classroom's media states), `box(id)`
 * is an element's box in frame pixels (null when absent), `scale` the current factor. It refits on resize.
 */
export function createCanvas(host) {
  const background = h("div", { class: "canvas-bg" });
  const content = h("div", { class: "canvas-content" });
  const overlays = h("div", { class: "canvas-overlays" });
  const frame = h("div", { class: "canvas-frame" }, background, content, overlays);
  host.append(frame);
  const api = {
    frame, content, overlays, scale: 1,
    fit() {
      const w = host.clientWidth;
      const hh = host.clientHeight || w * RATIO;
      if (!w) return;
      const width = hh / w > RATIO ? w : hh / RATIO;
      api.scale = width / VIEWPORT;
      frame.style.width = `${width}px`;
      frame.style.height = `${width * RATIO}px`;
      content.style.transform = `scale(${api.scale})`;
      frame.dataset.scale = api.scale.toFixed(4);
      frame.dispatchEvent(new CustomEvent("canvas:fit", { detail: api.scale }));
    },
    draw(slide, ctx) {
      Object.assign(background.style, { background: "", backgroundImage: "" },
        backgroundCss(slide?.background, slide?.theme));
      const font = slide?.theme?.fontName;
      content.style.fontFamily = font ? `"${font.replace(/"/g, "")}", system-ui, sans-serif` : "";
      content.style.color = slide?.theme?.fontColor || "";
      drawElements(content, slide?.elements || [], ctx);
      api.fit();
    },
    /** The element's box relative to the frame, in frame pixels (rotation ignored: the box of its layout). */
    box(id) {
      const node = content.querySelector(`[data-element-id="${CSS.escape(id)}"]`);
      if (!node) return null;
      const k = api.scale;
      return { left: node.offsetLeft * k, top: node.offsetTop * k, width: node.offsetWidth * k,
        height: node.offsetHeight * k };
    },
  };
  new ResizeObserver(() => api.fit()).observe(host);
  return api;
}
