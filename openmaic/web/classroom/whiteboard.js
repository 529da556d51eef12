// The whiteboard (OPENMAIC-COURSE-FORMAT §4.6, §8.7): a 1000 × 563 design board over the slide, scaled like it.
// Each `wb_*` drawing action appends one ordinary slide element to the board's page (held in memory); `run`
// performs an action and answers how long the player waits for it (its animation), in ms.

import { drawElements, RATIO, VIEWPORT } from "./canvas.js";
import { t } from "./i18n.js";
import { h } from "./util.js";

const SHAPES = {
  rectangle: "M 0 0 L 1000 0 L 1000 1000 L 0 1000 Z",
  circle: "M 1000 500 A 500 500 0 1 1 0 500 A 500 500 0 1 1 1000 500 Z",
  triangle: "M 500 0 L 1000 1000 L 0 1000 Z",
};
const TEX = /\$[^$]+\$|\\(frac|sqrt|sum|int|alpha|beta|pi|theta|cdot|times|le|ge)\b/;
let drawn = 0;

const escapeHtml = (v) => String(v).replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]);

/** The element a drawing action adds, or null when it draws nothing. */
export function elementOf(a) {
  const id = a.elementId || `wb_${a.type.slice(8)}_${++drawn}`;
  const base = { id, left: a.x ?? 0, top: a.y ?? 0, width: a.width, height: a.height, rotate: 0 };
  switch (a.type) {
    case "wb_draw_text": {
      const content = String(a.content ?? "");
      if (!content.trim()) return null;
      const size = { width: a.width ?? 400, height: a.height ?? 100 };
      if (TEX.test(content) && !content.startsWith("<")) {
        return { ...base, ...size, type: "latex", latex: content, html: `<span class="tex">${escapeHtml(content)}</span>`,
          color: a.color || "#333333" };
      }
      const html = content.startsWith("<") ? content
        : `<p style="font-size: ${a.fontSize ?? 18}px;">${escapeHtml(content)}</p>`;
      return { ...base, ...size, type: "text", content: html, defaultFontName: "Microsoft YaHei",
        defaultColor: a.color || "#333333" };
    }
    case "wb_draw_shape":
      return { ...base, type: "shape", viewBox: [1000, 1000], path: SHAPES[a.shape] || SHAPES.rectangle,
        fill: a.fillColor || "#5b9bd5", fixedRatio: false };
    case "wb_draw_chart":
      return { ...base, type: "chart", chartType: a.chartType, data: a.data || {},
        themeColors: a.themeColors || ["#5b9bd5", "#ed7d31", "#a5a5a5", "#ffc000", "#4472c4"] };
    case "wb_draw_latex":
      return { ...base, width: a.width ?? 400, height: a.height ?? 80, type: "latex", latex: a.latex,
        html: a.html || `<span class="tex">${escapeHtml(a.latex || "")}</span>`, color: a.color || "#000000" };
    case "wb_draw_table": {
      const rows = a.data || [];
      const cols = Math.max(1, ...rows.map((r) => r.length));
      return { ...base, type: "table", colWidths: Array(cols).fill(1 / cols), cellMinHeight: 36,
        outline: a.outline || { width: 2, style: "solid", color: "#eeece1" },
        theme: a.theme ? { color: a.theme.color, rowHeader: true } : undefined,
        data: rows.map((r, ri) => r.map((text, ci) => ({ id: `c${ri}_${ci}`, colspan: 1, rowspan: 1,
          text: escapeHtml(text) }))) };
    }
    case "wb_draw_line": {
      const left = Math.min(a.startX, a.endX);
      const top = Math.min(a.startY, a.endY);
      return { id, type: "line", left, top, width: a.width ?? 2, start: [a.startX - left, a.startY - top],
        end: [a.endX - left, a.endY - top], color: a.color || "#333333", style: a.style || "solid",
        points: a.points || ["", ""] };
    }
    case "wb_draw_code":
      return { ...base, width: a.width ?? 500, height: a.height ?? 300, type: "code", language: a.language,
        fileName: a.fileName, showLineNumbers: true, fontSize: 14,
        lines: String(a.code ?? "").split("\n").map((content, i) => ({ id: `L${i + 1}`, content })) };
    default:
      return null;
  }
}

function editCode(el, a) {
  const lines = [...el.lines];
  const at = (id) => lines.findIndex((l) => l.id === id);
  const fresh = (content) => String(content ?? "").split("\n").map((c) => ({ id: `L${Math.random().toString(36).slice(2, 8)}`,
    content: c }));
  if (a.operation === "insert_after" || a.operation === "insert_before") {
    const i = at(a.lineId);
    if (i < 0) return el;
    lines.splice(a.operation === "insert_after" ? i + 1 : i, 0, ...fresh(a.content));
  } else if (a.operation === "delete_lines") {
    return { ...el, lines: lines.filter((l) => !(a.lineIds || []).includes(l.id)) };
  } else if (a.operation === "replace_lines") {
    const ids = a.lineIds || [];
    const first = at(ids[0]);
    if (first < 0) return el;
    const added = fresh(a.content).map((l, i) => (ids[i] ? { ...l, id: ids[i] } : l));
    const kept = lines.filter((l) => !ids.includes(l.id));
    kept.splice(Math.min(first, kept.length), 0, ...added);
    return { ...el, lines: kept };
  }
  return { ...el, lines };
}

export function createWhiteboard(canvas) {
  let initial = [];
  const content = h("div", { class: "wb-content" });
  const board = h("div", { class: "whiteboard", hidden: true, role: "region", "aria-label": t("whiteboard") },
    h("div", { class: "wb-scale" }, content));
  canvas.overlays.append(board);
  let elements = [];
  const fit = () => {
    const k = canvas.frame.clientWidth / VIEWPORT;
    content.style.transform = `scale(${k})`;
  };
  canvas.frame.addEventListener("canvas:fit", fit);
  const redraw = () => {
    drawElements(content, elements, { media: {} });
    board.dataset.count = String(elements.length);
  };
  const api = {
    board,
    get open() {
      return !board.hidden;
    },
    elements: () => elements,
    /** What the board holds when a scene starts: the stage whiteboard's last page (§2.3). */
    setInitial(list) {
      initial = [...list];
    },
    reset() {
      elements = [...initial];
      board.hidden = true;
      redraw();
    },
    /** Perform a `wb_*` action; answers the wait in ms (already done when `silent`). */
    run(a) {
      let wait = 0;
      if (a.type !== "wb_close" && a.type !== "wb_clear" && a.type !== "wb_delete" && board.hidden) {
        board.hidden = false;
        fit();
        wait += 2000;
      }
      switch (a.type) {
        case "wb_open":
          return wait; // already open: nothing to animate
        case "wb_close":
          board.hidden = true;
          return 700;
        case "wb_clear": {
          const n = elements.length;
          elements = [];
          redraw();
          return n ? Math.min(1400, 380 + 55 * n) : 0;
        }
        case "wb_delete":
          elements = elements.filter((e) => e.id !== a.elementId);
          redraw();
          return 300;
        case "wb_edit_code":
          elements = elements.map((e) => (e.id === a.elementId && e.type === "code" ? editCode(e, a) : e));
          redraw();
          return wait + 600;
        default: {
          const el = elementOf(a);
          if (el) {
            elements = [...elements, el];
            redraw();
          }
          const lines = a.type === "wb_draw_code" ? String(a.code ?? "").split("\n").length : 0;
          return wait + (lines ? Math.min(3000, 800 + 50 * lines) : 800);
        }
      }
    },
  };
  redraw();
  return api;
}

export { RATIO };
