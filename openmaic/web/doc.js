// The course document (GET /api/classrooms/{id}: OpenMAIC's stage and scenes) as the workbench shows it: a slide
// drawn from its canvas, a quiz with its answers, an interactive page in its sandbox, the classroom script.
// Every view (run, course, Pro session, library card) draws a course from here, so they all show the same thing.

import { h } from "./api.js";
import { sceneFrame } from "./sandbox.js";
import { t, tn } from "./i18n.js";

const ELEMENT_NAMES = { code: "[code]", table: "[table]", chart: "[chart]" };

const SVG = "http://www.w3.org/2000/svg";
const CANVAS_W = 1000;

function svg(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  return el;
}

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: " " };

function unescape(text) {
  return text.replace(/&(#x[0-9a-f]+|#\d+|\w+);/gi, (m, e) => {
    if (e[0] === "#") {
      const code = e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : Number(e.slice(1));
      return Number.isFinite(code) && code > 0 && code < 0x110000 ? String.fromCodePoint(code) : m;
    }
    return ENTITIES[e.toLowerCase()] ?? m;
  });
}

/** The paragraphs of an element's HTML as plain text: the markup is read as text and never becomes DOM (the
 * classroom player is the one place that renders the document's HTML). */
export function paragraphs(html) {
  return String(html || "")
    .split(/<\/(?:p|li|h\d|div)\s*>|<br\s*\/?>/i)
    .map((chunk) => unescape(chunk.replace(/<[^>]*>/g, " ")).replace(/\s+/g, " ").trim())
    .filter(Boolean);
}

/** The URL of a picture or video an element names: a generated one by its ref once done, else the src itself. */
export function mediaUrl(src, media) {
  const m = media?.[src];
  if (m) return m.status === "done" && m.assetId ? `/api/assets/${encodeURIComponent(m.assetId)}` : null;
  return /^(https?:|data:image\/|\/)/.test(src || "") ? src : null;
}

function fontSize(html) {
  const m = /font-size:\s*(\d+(?:\.\d+)?)px/.exec(html || "");
  return m ? Number(m[1]) : 18;
}

/** A slide's canvas drawn to scale as SVG (1000 wide, as OpenMAIC lays it out). `small` draws a picture only. */
export function slideCanvas(canvas, media, { small = false, label = "" } = {}) {
  const height = CANVAS_W / (canvas?.viewportRatio ? 1 / canvas.viewportRatio : 16 / 9);
  const root = svg("svg", { viewBox: `0 0 ${CANVAS_W} ${height}`, class: small ? "canvas small" : "canvas", role: "img" });
  root.setAttribute("aria-label", label || t("Slide"));
  const bg = canvas?.background?.type === "solid" && canvas.background.color ? canvas.background.color : "#ffffff";
  root.append(svg("rect", { x: 0, y: 0, width: CANVAS_W, height, fill: bg }));
  for (const el of canvas?.elements || []) {
    const box = { x: el.left || 0, y: el.top || 0, width: Math.max(1, el.width || 1), height: Math.max(1, el.height || 1) };
    if (el.type === "shape") {
      root.append(svg("rect", { ...box, fill: el.fill || "#e5e7eb", rx: 6 }));
    } else if (el.type === "line") {
      const [a, b] = [el.start || [0, 0], el.end || [0, 0]];
      root.append(svg("line", { x1: box.x + a[0], y1: box.y + a[1], x2: box.x + b[0], y2: box.y + b[1], stroke: el.color || "#333", "stroke-width": el.width ? 2 : 2 }));
    } else if (el.type === "image" || el.type === "video") {
      const url = el.type === "image" ? mediaUrl(el.src, media) : (el.poster && mediaUrl(el.poster, media));
      if (url) root.append(svg("image", { ...box, href: url, preserveAspectRatio: "xMidYMid slice" }));
      else {
        root.append(svg("rect", { ...box, fill: "#eef2f7", stroke: "#c5cdd8", "stroke-dasharray": "8 6" }));
        const mark = svg("text", { x: box.x + box.width / 2, y: box.y + box.height / 2, "text-anchor": "middle", "dominant-baseline": "middle", "font-size": 28, fill: "#7a8699" });
        mark.textContent = el.type === "image" ? "🖼" : "▶";
        root.append(mark);
      }
    } else if (el.type === "text" || el.type === "latex" || el.type === "code" || el.type === "table" || el.type === "chart") {
      const html = el.type === "text" ? el.content : el.type === "latex" ? el.latex : "";
      const lines = el.type === "text" ? paragraphs(html) : el.type === "latex" ? [el.latex || ""] : [t(ELEMENT_NAMES[el.type] || el.type)];
      const fo = svg("foreignObject", box);
      const div = document.createElement("div");
      div.className = "canvas-text";
      div.style.fontSize = `${fontSize(html)}px`;
      if (el.defaultColor) div.style.color = el.defaultColor;
      for (const line of lines) {
        const p = document.createElement("p");
        p.textContent = line;
        div.append(p);
      }
      fo.append(div);
      root.append(fo);
    }
  }
  return root;
}

/** A quiz: each question, its options and the right answer marked. */
export function quizView(content) {
  return h("ol", { class: "quiz questions" }, (content.questions || []).map((q) => {
    const answers = new Set(q.answer || []);
    return h("li", {},
      h("p", { class: "question" }, q.question),
      q.options?.length ? h("ul", { class: "options" }, q.options.map((o) => {
        const right = answers.has(o.value) || answers.has(o.label);
        return h("li", { class: right ? "correct" : "" },
          h("span", { class: "letter", "aria-hidden": "true" }, o.value),
          h("span", {}, o.label),
          right ? h("strong", { class: "answer-mark" }, ` ✓ ${t("correct answer")}`) : null);
      })) : h("p", { class: "hint" }, t("Answered in the learner's own words.")),
      q.analysis ? h("p", { class: "explanation" }, h("strong", {}, `${t("Why:")} `), q.analysis) : null);
  }));
}

/** A scene's content as the workbench shows it. */
export function sceneBody(scene, media) {
  const c = scene?.content;
  if (!c) return null;
  if (c.type === "slide") return h("div", { class: "slide" }, slideCanvas(c.canvas, media, { label: scene.title }));
  if (c.type === "quiz") return h("div", { class: "quiz-scene" }, quizView(c));
  if (c.type === "interactive") {
    return h("div", { class: "interactive" }, c.html ? sceneFrame(c.html, t("Interactive page: {title}", { title: scene.title }))
      : c.url ? h("a", { href: c.url, rel: "noopener noreferrer", target: "_blank" }, c.url) : null);
  }
  return h("p", { class: "hint" }, t("A {type} scene (not shown here).", { type: c.type }));
}

/** What the teachers say in a scene, in order (its speech actions), folded away. */
export function sceneScript(scene, agents) {
  const spoken = (scene?.actions || []).filter((a) => a.type === "speech" && a.text);
  if (!spoken.length) return null;
  const names = new Map((agents || []).map((a) => [a.id, a.name]));
  return h("details", { class: "script" },
    h("summary", {}, tn(spoken.length, "Classroom script ({count} step)", "Classroom script ({count} steps)")),
    h("ol", {}, spoken.map((a) => h("li", {}, h("strong", {}, names.get(a.agentId) || t("Teacher")), `: ${a.text}`))));
}

/** The scenes of a course, ready and still to be written, by their order: `{id, title, type, order, scene}`. */
export function courseScenes(classroom) {
  const ready = (classroom?.scenes || []).map((s) => ({ id: s.id, title: s.title, type: s.type, order: s.order, scene: s }));
  const pending = (classroom?.pendingScenes || []).map((p) => ({ ...p, scene: null }));
  return [...ready, ...pending].sort((a, b) => a.order - b.order);
}

/** The course's agents (generated or preset) as {id, name}. */
export function courseAgents(classroom) {
  return classroom?.stage?.generatedAgentConfigs || [];
}
