// One slide element of the course document (OPENMAIC-COURSE-FORMAT §3.3) as DOM, in design pixels: the box is
// placed by canvas.js; this module fills it. Text HTML is used as given (the server sanitizes it on the way in).

import { drawChart } from "./charts.js";
import { t } from "./i18n.js";
import { h, isPlaceholder, mediaUrl, s } from "./util.js";

const DASH = { dashed: (w) => `${w * 4} ${w * 2}`, dotted: (w) => `${w} ${w * 1.5}` };

function border(outline) {
  if (!outline || !outline.width) return undefined;
  return `${outline.width}px ${outline.style || "solid"} ${outline.color || "#d14424"}`;
}

function shadowOf(sh) {
  return sh ? `${sh.h || 0}px ${sh.v || 0}px ${sh.blur || 0}px ${sh.color || "#000"}` : undefined;
}

function flip(el) {
  const parts = [];
  if (el.flipH) parts.push("scaleX(-1)");
  if (el.flipV) parts.push("scaleY(-1)");
  return parts.join(" ") || undefined;
}

/** Apply a text block's typography (text elements and shape text). */
function typeset(node, el, paragraphSpace) {
  Object.assign(node.style, {
    fontFamily: el.defaultFontName ? `"${el.defaultFontName.replace(/"/g, "")}", system-ui, sans-serif` : "inherit",
    color: el.defaultColor || "inherit",
    lineHeight: String(el.lineHeight ?? 1.5),
    letterSpacing: el.wordSpace ? `${el.wordSpace}px` : "",
  });
  node.style.setProperty("--paragraph-space", `${el.paragraphSpace ?? paragraphSpace}px`);
  node.innerHTML = el.content || "";
}

function text(el) {
  const inner = h("div", { class: "text-body" });
  typeset(inner, el, 5);
  const box = h("div", { class: `el-text v-${el.vAlign || "top"}` }, inner);
  Object.assign(box.style, {
    background: el.fill || "",
    border: border(el.outline) || "",
    opacity: el.opacity ?? "",
    textShadow: shadowOf(el.shadow) || "",
    writingMode: el.vertical ? "vertical-rl" : "",
  });
  return box;
}

/** A skeleton standing for media that is not there (yet): pending, failed or switched off. */
export function skeleton(kind, ref, media) {
  const status = media?.[ref]?.status || "pending";
  const key = `${kind}${status === "failed" ? "Failed" : status === "disabled" ? "Disabled" : "Pending"}`;
  return h("div", { class: "skeleton", role: "img", "aria-label": t(key), dataset: { status, ref: ref || "" } },
    h("span", { class: `badge ${status}` }, t(key)));
}

function image(el, ctx) {
  const url = mediaUrl(el.src);
  if (!url) return skeleton("image", el.src, ctx.media);
  const [[x1, y1], [x2, y2]] = el.clip?.range || [[0, 0], [100, 100]];
  const w = Math.max(1, x2 - x1);
  const hh = Math.max(1, y2 - y1);
  const img = h("img", { src: url, alt: el.name || "", draggable: "false", decoding: "async" });
  Object.assign(img.style, {
    width: `${(100 * 100) / w}%`, height: `${(100 * 100) / hh}%`,
    left: `${(-x1 * 100) / w}%`, top: `${(-y1 * 100) / hh}%`,
    filter: Object.entries(el.filters || {}).map(([k, v]) => `${k}(${v})`).join(" "),
    transform: flip(el) || "",
  });
  const box = h("div", { class: "el-image" }, img, el.colorMask ? h("div", { class: "mask" }) : null);
  if (el.colorMask) box.lastChild.style.background = el.colorMask;
  Object.assign(box.style, {
    borderRadius: el.clip?.shape === "ellipse" ? "50%" : el.radius ? `${el.radius}px` : "",
    border: border(el.outline) || "", boxShadow: shadowOf(el.shadow) || "",
  });
  return box;
}

let gradientIds = 0;

function gradientDef(g) {
  const id = `grad-${++gradientIds}`;
  const stops = (g.colors || []).map((c) => s("stop", { offset: `${c.pos}%`, "stop-color": c.color }));
  if (g.type === "radial") return [id, s("radialGradient", { id }, stops)];
  const a = ((g.rotate || 0) - 90) * (Math.PI / 180); // CSS angles: 0deg points up, clockwise
  const [dx, dy] = [Math.cos(a) / 2, Math.sin(a) / 2];
  return [id, s("linearGradient", { id, x1: 0.5 - dx, y1: 0.5 - dy, x2: 0.5 + dx, y2: 0.5 + dy }, stops)];
}

function shape(el) {
  const [vw, vh] = el.viewBox || [el.width, el.height];
  let paint = el.fill === "" ? "none" : el.fill || "#5b9bd5";
  const defs = s("defs");
  if (el.gradient) {
    const [id, node] = gradientDef(el.gradient);
    defs.append(node);
    paint = `url(#${id})`;
  }
  const o = el.outline || {};
  const path = s("path", {
    d: el.path || `M0 0 L${vw} 0 L${vw} ${vh} L0 ${vh} Z`, fill: paint,
    stroke: o.width ? o.color || "#d14424" : "none", "stroke-width": o.width || 0,
    "stroke-dasharray": o.width && DASH[o.style] ? DASH[o.style](o.width) : undefined,
    "vector-effect": "non-scaling-stroke",
    transform: `scale(${el.width / (vw || 1)} ${el.height / (vh || 1)})`,
  });
  const svg = s("svg", { width: el.width, height: el.height, overflow: "visible", "aria-hidden": "true" }, defs, path);
  const box = h("div", { class: "el-shape" }, svg);
  Object.assign(box.style, { opacity: el.opacity ?? "", transform: flip(el) || "",
    filter: el.shadow ? `drop-shadow(${shadowOf(el.shadow)})` : "" });
  if (el.text?.content) {
    const label = h("div", { class: "text-body" });
    typeset(label, el.text, 5);
    box.append(h("div", { class: `shape-text v-${el.text.align || "middle"}` }, label));
  }
  return box;
}

function linePath(el) {
  const [sx, sy] = el.start || [0, 0];
  const [ex, ey] = el.end || [0, 0];
  if (el.broken) return `M${sx} ${sy} L${el.broken[0]} ${el.broken[1]} L${ex} ${ey}`;
  if (el.broken2) {
    const [bx, by] = el.broken2;
    return Math.abs(ex - sx) >= Math.abs(ey - sy)
      ? `M${sx} ${sy} L${bx} ${sy} L${bx} ${ey} L${ex} ${ey}`
      : `M${sx} ${sy} L${sx} ${by} L${ex} ${by} L${ex} ${ey}`;
  }
  if (el.curve) return `M${sx} ${sy} Q${el.curve[0]} ${el.curve[1]} ${ex} ${ey}`;
  if (el.cubic) {
    const [[c1x, c1y], [c2x, c2y]] = el.cubic;
    return `M${sx} ${sy} C${c1x} ${c1y} ${c2x} ${c2y} ${ex} ${ey}`;
  }
  return `M${sx} ${sy} L${ex} ${ey}`;
}

let markerIds = 0;

function marker(kind, color, start) {
  const id = `marker-${++markerIds}`;
  const shapeNode = kind === "dot"
    ? s("circle", { cx: 5, cy: 5, r: 4, fill: color })
    : s("path", { d: "M0 0 L10 5 L0 10 Z", fill: color });
  const node = s("marker", {
    id, viewBox: "0 0 10 10", refX: kind === "dot" ? 5 : 8, refY: 5, markerWidth: 3, markerHeight: 3,
    orient: start ? "auto-start-reverse" : "auto", markerUnits: "strokeWidth",
  }, shapeNode);
  return [id, node];
}

/** A line: its box is its points' extent (at least 24 px each way); `width` is its stroke. */
export function lineBox(el) {
  const pts = [el.start, el.end, el.broken, el.broken2, el.curve, ...(el.cubic || [])].filter(Boolean);
  return {
    width: Math.max(24, ...pts.map((p) => p[0])), height: Math.max(24, ...pts.map((p) => p[1])),
    minX: Math.min(0, ...pts.map((p) => p[0])), minY: Math.min(0, ...pts.map((p) => p[1])),
  };
}

function line(el) {
  const color = el.color || "#333333";
  const w = el.width || 2;
  const defs = s("defs");
  const [startKind, endKind] = el.points || ["", ""];
  const attrs = {
    d: linePath(el), fill: "none", stroke: color, "stroke-width": w, "stroke-linecap": "round",
    "stroke-dasharray": DASH[el.style] ? DASH[el.style](w) : undefined,
  };
  if (startKind) {
    const [id, m] = marker(startKind, color, true);
    defs.append(m);
    attrs["marker-start"] = `url(#${id})`;
  }
  if (endKind) {
    const [id, m] = marker(endKind, color, false);
    defs.append(m);
    attrs["marker-end"] = `url(#${id})`;
  }
  const box = lineBox(el);
  return h("div", { class: "el-line" },
    s("svg", { width: box.width, height: box.height, overflow: "visible", "aria-hidden": "true" }, defs,
      s("path", attrs)));
}

function latex(el) {
  const inner = h("div", { class: "latex-body" });
  if (el.html) inner.innerHTML = el.html;
  else if (el.path && el.viewBox) {
    inner.append(s("svg", { viewBox: `0 0 ${el.viewBox[0]} ${el.viewBox[1]}`, width: "100%", height: "100%" },
      s("path", { d: el.path, fill: "none", stroke: el.color || "#000", "stroke-width": el.strokeWidth || 2 })));
  }
  const box = h("div", { class: `el-latex align-${el.align || "center"}`, role: "math", "aria-label": el.latex || "" },
    inner);
  box.style.color = el.color || "";
  // Fit the formula to its box once it is laid out (scaled up or down, as OpenMAIC's default canvas does).
  requestAnimationFrame(() => {
    const nw = inner.scrollWidth;
    const nh = inner.scrollHeight;
    if (!nw || !nh) return;
    const k = Math.min(el.width / nw, el.height / nh, 4);
    inner.style.transform = `scale(${k})`;
  });
  return box;
}

function table(el) {
  const widths = el.colWidths || [];
  const theme = el.theme;
  const rows = (el.data || []).map((row, r) => h("tr", {
    style: { height: `${el.rowHeights?.[r] ?? el.cellMinHeight ?? 36}px` },
    class: theme && ((r === 0 && theme.rowHeader !== false) || (r === el.data.length - 1 && theme.rowFooter))
      ? "theme-row" : "",
  }, row.map((cell) => {
    const st = cell.style || {};
    const td = h(r === 0 && theme?.rowHeader !== false && theme ? "th" : "td", {
      colspan: cell.colspan > 1 ? String(cell.colspan) : undefined,
      rowspan: cell.rowspan > 1 ? String(cell.rowspan) : undefined,
    });
    td.innerHTML = cell.text || "";
    const b = cell.borders || {};
    Object.assign(td.style, {
      fontWeight: st.bold ? "bold" : "", fontStyle: st.em ? "italic" : "",
      textDecoration: [st.underline && "underline", st.strikethrough && "line-through"].filter(Boolean).join(" "),
      color: st.color || "", background: st.backcolor || "", fontSize: st.fontsize || "", fontFamily: st.fontname || "",
      textAlign: st.align || "", padding: cell.padding || "", verticalAlign: cell.vAlign || "middle",
      border: border(el.outline) || "",
    });
    for (const side of ["top", "bottom", "left", "right"]) {
      if (b[side]) td.style[`border${side[0].toUpperCase()}${side.slice(1)}`] = border(b[side]);
    }
    return td;
  })));
  const tableNode = h("table", {},
    h("colgroup", {}, widths.map((w) => h("col", { style: { width: `${w * 100}%` } }))), h("tbody", {}, rows));
  if (theme?.color) tableNode.style.setProperty("--table-theme", theme.color);
  return h("div", { class: "el-table" }, tableNode);
}

/** Code with line numbers; every line keeps its id (`data-line-id`) for whiteboard edits. */
export function codeBlock(el) {
  const lines = (el.lines || []).map((l, i) => h("li", { dataset: { lineId: l.id || `L${i + 1}` } },
    h("code", {}, l.content ?? "")));
  const list = h("ol", { class: el.showLineNumbers === false ? "no-numbers" : "" }, lines);
  return h("div", { class: "el-code", style: { fontSize: `${el.fontSize || 14}px` } },
    el.fileName ? h("div", { class: "file-name" }, el.fileName) : null,
    h("pre", { "aria-label": el.fileName || el.language || "code" }, list));
}

function video(el, ctx) {
  const url = mediaUrl(el.src);
  if (!url) return skeleton("video", el.mediaRef || el.src, ctx.media);
  return h("div", { class: "el-video" }, h("video", {
    src: url, poster: mediaUrl(el.poster) || undefined, controls: true, preload: "metadata", playsinline: true,
    "aria-label": el.name || t("videoPending").replace(/…$/, ""),
  }));
}

function audio(el) {
  const url = mediaUrl(el.src);
  const player = url ? new Audio(url) : null;
  if (player) player.loop = !!el.loop;
  const button = h("button", {
    type: "button", class: "el-audio", "aria-label": t("playAudio"), disabled: !player,
    onclick: () => (player.paused ? player.play().catch(() => {}) : player.pause()),
  }, s("svg", { viewBox: "0 0 24 24", width: "60%", height: "60%", "aria-hidden": "true" },
    s("path", { d: "M8 5v14l11-7z", fill: el.color || "currentColor" })));
  return button;
}

const DRAW = {
  text, image, shape, line, latex, table, video, audio,
  chart: (el) => h("div", { class: "el-chart", style: { background: el.fill || "", border: border(el.outline) || "" } },
    drawChart(el)),
  code: codeBlock,
};

/** The element's content, or null for an unknown type (not drawn, as in OpenMAIC). */
export function drawElement(el, ctx) {
  const draw = DRAW[el.type];
  return draw ? draw(el, ctx) : null;
}

export { isPlaceholder };
