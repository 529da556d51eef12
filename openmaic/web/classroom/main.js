// The classroom page (`/classroom/{id}`): plays an OpenMAIC course document the way OpenMAIC's classroom does.
//
// It reads `GET /api/classrooms/{id}` (`{classroom: {id, stage, scenes, media, pendingScenes, generatingRunId,
// seq, …}}`), or the document embedded in the page by the offline export. While a run still writes the course
// (`generatingRunId`), it follows that run's events and reads the classroom again on `scene_ready`, `media`,
// `completed` and `ended`: pending scenes and media fill in where they stand, and the scene on stage is redrawn
// only when its own data changed. The scene shown is in the address (`#scene-3`).
//
// The learner's place and quiz answers are kept as their runtime records on the course (progress.js, read beside
// the classroom): a reload or another device of the same learner goes on where they stopped, answers shown (the
// first scene is drawn meanwhile; `data-resumed` on <main> says when the kept progress was applied).
//
// Keys: Space play/pause, ← → scenes, R replay the scene, [ and ] slower/faster, Q ask a question (not while a
// form control has the focus).

import { roster } from "./agents.js";
import { createChat } from "./chat.js";
import { chooseLanguage, LANGUAGES, language, setLanguage, t } from "./i18n.js";
import { createPlayer, SPEEDS } from "./player.js";
import { KEPT, loadProgress, savePosition } from "./progress.js";
import { restoreAttempts, scores } from "./quiz.js";
import { authHeaders, fill, h } from "./util.js";

const main = document.getElementById("main");
const announcer = document.getElementById("announcer");
const classroomId = decodeURIComponent(location.pathname.replace(/^.*\/classroom\//, "").replace(/\/+$/, ""));
const FOLLOWED = new Set(["scene_ready", "media", "completed", "ended"]);

const view = { classroom: null, scenes: [], index: 0, player: null, ui: null, runId: null, events: null, done: false,
  chat: null, goes: 0 };

function announce(text) {
  announcer.textContent = "";
  setTimeout(() => {
    announcer.textContent = text;
  }, 60);
}

/** Ready scenes and pending ones, in course order. */
function sceneList(c) {
  const list = (v) => (Array.isArray(v) ? v.filter((s) => s && typeof s === "object") : []);
  const ready = list(c.scenes).map((s) => ({ ...s }));
  const pending = list(c.pendingScenes).filter((p) => !ready.some((s) => s.id === p.id))
    .map((p) => ({ ...p, pending: true }));
  return [...ready, ...pending].sort((a, b) => (a.order ?? 0) - (b.order ?? 0));
}

function embedded() {
  const node = document.getElementById("classroom-data");
  return node ? JSON.parse(node.textContent) : null;
}

async function read() {
  const doc = embedded();
  if (doc) return doc;
  const r = await fetch(`/api/classrooms/${encodeURIComponent(classroomId)}`, {
    headers: { Accept: "application/json", ...authHeaders() }, credentials: "same-origin",
  });
  if (!r.ok) {
    const err = new Error(`the server answered ${r.status}`);
    err.status = r.status;
    throw err;
  }
  return (await r.json()).classroom;
}

// -- the page -----------------------------------------------------------------------------------------------------

function layout(c) {
  const title = h("h1", { class: "course-title" }, c.stage?.name || c.title || "");
  const langSelect = h("select", { id: "language", "aria-label": t("language") },
    Object.entries(LANGUAGES).map(([k, v]) => h("option", { value: k, selected: k === language() }, v)));
  langSelect.addEventListener("change", () => {
    setLanguage(langSelect.value);
    rebuild();
  });
  const exports = embedded() ? null : h("span", { class: "exports" }, `${t("download")}: `,
    h("a", { href: `/api/classrooms/${encodeURIComponent(classroomId)}/export.pptx` }, t("exportPptx")), " · ",
    h("a", { href: `/api/classrooms/${encodeURIComponent(classroomId)}/export.html` }, t("exportHtml")));
  const status = h("p", { class: "progress-line", role: "status" });
  const nav = h("ol", { class: "scene-nav-list" });
  const stageCol = h("div", { class: "stage-column" });
  const heading = h("h2", { class: "scene-title", tabindex: "-1" });
  const body = h("div", { class: "classroom-body" });
  // Questions need the server: the offline page plays the course without them.
  view.chat = embedded() ? null : createChat(classroomId, {
    context: chatContext,
    onOpen: () => {
      view.player?.engine?.pause();
      body.classList.add("with-chat");
    },
    onClose: () => body.classList.remove("with-chat"),
  });
  const ask = view.chat && h("button", { type: "button", class: "button ask", "aria-keyshortcuts": "Q",
    onclick: () => (view.chat.isOpen ? view.chat.close() : view.chat.open()) }, t("askQuestion"));
  fill(main,
    h("div", { class: "classroom-head" }, title,
      h("div", { class: "head-tools" }, ask, exports, h("label", { for: "language" }, `${t("language")} `), langSelect)),
    status,
    fill(body,
      h("nav", { class: "scene-nav", "aria-label": t("scenes") }, nav),
      h("div", { class: "stage-wrap" }, heading, stageCol),
      view.chat?.panel));
  return { title, status, nav, stageCol, heading };
}

/** What a question is asked about: the scene on stage (or the last one, past the end), where in its script. */
function chatContext() {
  const c = view.classroom;
  return { scene: view.scenes[view.index], actionIndex: view.done ? undefined : view.player?.engine?.index,
    agents: roster(c.stage), course: c.stage?.name || c.title || "" };
}

function navItems() {
  const { nav } = view.ui;
  nav.replaceChildren(...view.scenes.map((s, i) => h("li", { dataset: { status: s.pending ? "pending" : "ready" } },
    h("button", { type: "button", class: "scene-link", "aria-current": i === view.index && !view.done ? "true" : null,
      onclick: () => go(i, { play: false }) },
    h("span", { class: "scene-number" }, `${i + 1}.`), " ", s.title || "",
    s.pending ? h("span", { class: "scene-state" }, ` (${t("beingWritten")})`) : null))));
}

function statusLine() {
  const c = view.classroom;
  const ready = view.scenes.filter((s) => !s.pending).length;
  const total = view.scenes.length;
  main.dataset.state = c.generatingRunId ? "generating" : "complete";
  main.dataset.readyScenes = String(ready);
  main.dataset.totalScenes = String(total);
  view.ui.status.textContent = c.generatingRunId ? t("generating", { ready, total }) : "";
  view.ui.status.hidden = !c.generatingRunId;
}

function ctxFor(i) {
  return {
    classroom: view.classroom, agents: roster(view.classroom.stage), index: i, total: view.scenes.length,
    canFinish: !view.classroom.generatingRunId,
    onNext: ({ autoplay }) => (i >= view.scenes.length - 1 ? complete() : go(i + 1, { play: autoplay })),
    onPrev: () => go(i - 1, { play: false }),
    onPosition: (actionIndex) => keepPlace(i, actionIndex),
    onDiscuss: (a, agent) => view.chat?.open({ topic: a.topic || "", agent,
      say: t("joinDiscussion", { topic: a.topic || "" }) }),
  };
}

// The place last kept on the server, on <main> (data-kept: "scene:action" or "complete"), for whoever watches.
document.addEventListener(KEPT, (e) => {
  main.dataset.kept = e.detail.complete ? "complete" : `${e.detail.sceneIndex + 1}:${e.detail.actionIndex}`;
});

function keepPlace(i, actionIndex = 0) {
  const scene = view.scenes[i];
  if (!scene || scene.pending || embedded()) return;
  savePosition({ sceneId: scene.id, sceneIndex: i, actionIndex });
}

function go(i, { play = false, action = 0 } = {}) {
  if (i < 0 || i >= view.scenes.length) return;
  view.done = false;
  view.index = i;
  view.goes += 1;
  const scene = view.scenes[i];
  main.dataset.scene = String(i + 1);
  if (location.hash !== `#scene-${i + 1}`) history.replaceState(null, "", `#scene-${i + 1}`);
  ensureStage();
  view.ui.heading.textContent = `${t("sceneOf", { n: i + 1, total: view.scenes.length })} · ${scene.title || ""}`;
  view.player.show(scene, ctxFor(i), { play: play && !action });
  if (action > 0 && view.player.engine) {
    view.player.engine.seek(Math.min(action, view.player.engine.actions.length - 1));
    if (play) view.player.engine.play();
  }
  keepPlace(i, view.player.engine?.index ?? 0);
  navItems();
  announce(`${t("sceneOf", { n: i + 1, total: view.scenes.length })}: ${scene.title || ""}`);
}

function ensureStage() {
  if (view.player && view.ui.stageCol.contains(view.player.canvas.frame)) return;
  view.ui.stageCol.replaceChildren();
  view.player = createPlayer(view.ui.stageCol);
}

/** The completion page: the course's end and its quiz score. */
function complete() {
  view.player?.stop();
  view.done = true;
  main.dataset.scene = "complete";
  const quizzes = view.scenes.filter((s) => s.type === "quiz");
  const total = quizzes.reduce((sum, s) => sum + (s.content?.questions || [])
    .reduce((p, q) => p + (Number.isFinite(q.points) ? q.points : 1), 0), 0);
  const score = quizzes.reduce((sum, s) => sum + (scores.get(s.id)?.score || 0), 0);
  const answered = quizzes.filter((s) => scores.has(s.id));
  view.ui.heading.textContent = t("completeTitle");
  view.player = null;
  const last = view.scenes[view.scenes.length - 1];
  if (last && !embedded()) savePosition({ sceneId: last.id, sceneIndex: view.scenes.length - 1, complete: true });
  fill(view.ui.stageCol, h("section", { class: "completion", "aria-label": t("completeTitle") },
    h("p", {}, t("completeText", { title: view.classroom.stage?.name || view.classroom.title || "" })),
    h("p", { class: "course-score", dataset: { score: String(score), total: String(total) } },
      answered.length ? t("courseScore", { score, total }) : t("noQuizScore")),
    quizzes.length ? h("table", { class: "scene-scores" },
      h("caption", {}, t("scoresByScene")),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, t("quizColumn")), h("th", { scope: "col" }, t("scoreColumn")))),
      h("tbody", {}, quizzes.map((s) => {
        const kept = scores.get(s.id);
        return h("tr", { dataset: { sceneId: s.id } }, h("th", { scope: "row" }, s.title || ""),
          h("td", {}, kept ? t("scoreOf", { score: kept.score, total: kept.total }) : t("notAnswered")));
      }))) : null,
    h("button", { type: "button", class: "button primary", onclick: () => go(0, { play: false }) }, t("restart"))));
  navItems();
  view.ui.heading.focus();
}

function apply(classroom) {
  const first = !view.classroom;
  const before = view.scenes;
  view.classroom = classroom;
  view.scenes = sceneList(classroom);
  document.title = `${classroom.stage?.name || classroom.title || ""} · openmaic`;
  if (first) return;
  view.ui.title.textContent = classroom.stage?.name || classroom.title || "";
  statusLine();
  navItems();
  for (const s of view.scenes) {
    const old = before.find((b) => b.id === s.id);
    if (old?.pending && !s.pending) announce(`${t("sceneOf", { n: view.scenes.indexOf(s) + 1, total: view.scenes.length })}: ${s.title}`);
  }
  if (view.done || !view.player) return;
  const current = before[view.index];
  const at = view.scenes.findIndex((s) => s.id === current?.id);
  if (at >= 0) {
    view.index = at;
    view.player.refresh(view.scenes[at], ctxFor(at));
  }
  if (classroom.generatingRunId) follow(classroom.generatingRunId);
  else unfollow();
}

function rebuild() {
  view.ui = layout(view.classroom);
  view.player = null;
  statusLine();
  go(Math.min(view.index, view.scenes.length - 1));
}

// -- live ----------------------------------------------------------------------------------------------------------

let reading = null;
let readAgain = false;

function refresh() {
  if (reading) {
    readAgain = true;
    return;
  }
  reading = (async () => {
    do {
      readAgain = false;
      try {
        const c = await read();
        if (c.seq === undefined || !view.classroom || c.seq >= (view.classroom.seq ?? 0)) apply(c);
      } catch (err) {
        if (err.status === 404) notFound();
      }
    } while (readAgain);
  })().finally(() => {
    reading = null;
  });
}

async function follow(runId) {
  if (view.runId === runId) return;
  unfollow();
  view.runId = runId;
  const { EventStream } = await import("../events.js");
  if (view.runId !== runId) return;
  view.events = new EventStream(`/api/generation-runs/${encodeURIComponent(runId)}/events`, {
    onFrame: (type) => FOLLOWED.has(type) && refresh(),
    onCaughtUp: refresh,
    onGone: refresh,
  }).start();
}

function unfollow() {
  view.events?.stop();
  view.events = null;
  view.runId = null;
}

// -- the other pages --------------------------------------------------------------------------------------------

function notFound() {
  unfollow();
  chooseLanguage(null);
  document.title = `${t("notFoundTitle")} · openmaic`;
  main.dataset.state = "not-found";
  fill(main, h("div", { class: "not-found" }, h("h1", { tabindex: "-1" }, t("notFoundTitle")),
    h("p", {}, t("notFoundText")), h("p", {}, h("a", { href: "/" }, t("goHome")))));
  main.setAttribute("aria-busy", "false");
}

function failed(err) {
  chooseLanguage(null);
  main.dataset.state = err.status === 401 ? "sign-in" : "error";
  fill(main, h("div", { class: "notice error", role: "alert" },
    h("p", {}, `${t("loadFailed")} ${err.message}`),
    h("p", {}, err.status === 401 ? h("a", { href: "/" }, t("signIn"))
      : h("button", { type: "button", class: "button", onclick: () => location.reload() }, t("tryAgain")))));
  main.setAttribute("aria-busy", "false");
}

// -- keys ---------------------------------------------------------------------------------------------------------

document.addEventListener("keydown", (e) => {
  if (!view.classroom || e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
  if (e.target instanceof Element && e.target.closest("input, textarea, select, button, a, video, audio, iframe, [contenteditable]")
    && e.key === " ") return;
  if (e.target instanceof Element && e.target.closest("input, textarea, select, [contenteditable]")) return;
  const p = view.player;
  if (e.key === " " && p?.engine) p.engine.toggle();
  else if ((e.key === "q" || e.key === "Q") && view.chat) view.chat.open();
  else if (e.key === "ArrowRight") (view.index >= view.scenes.length - 1 && !view.classroom.generatingRunId) ? complete() : go(view.index + 1);
  else if (e.key === "ArrowLeft") go(view.done ? view.scenes.length - 1 : view.index - 1);
  else if ((e.key === "r" || e.key === "R") && p?.engine) {
    p.engine.seek(0);
    p.engine.play();
  } else if ((e.key === "]" || e.key === "[") && p) {
    const i = SPEEDS.indexOf(p.settings.speed);
    p.setSpeed(SPEEDS[Math.max(0, Math.min(SPEEDS.length - 1, i + (e.key === "]" ? 1 : -1)))]);
  } else return;
  e.preventDefault();
});

async function start() {
  let classroom;
  // The learner's kept progress is read beside the classroom; the first scene is drawn without waiting for it.
  const progress = embedded() ? null : loadProgress(classroomId);
  try {
    classroom = await read();
  } catch (err) {
    return err.status === 404 ? notFound() : failed(err);
  }
  chooseLanguage(classroom);
  apply(classroom);
  view.ui = layout(classroom);
  statusLine();
  if (!view.scenes.length) {
    view.ui.stageCol.append(h("p", { class: "scene-pending" }, t("pendingScene")));
  }
  const n = Number((location.hash.match(/^#scene-(\d+)$/) || [])[1] || 1);
  go(Math.max(0, Math.min(n - 1, view.scenes.length - 1)));
  const shown = view.goes;
  main.setAttribute("aria-busy", "false");
  if (classroom.generatingRunId) follow(classroom.generatingRunId);
  const kept = await progress;
  if (kept) resume(kept, view.goes === shown && view.player?.engine?.mode !== "playing");
}

/** Show what the learner kept: their answers, and (unless they moved on meanwhile) the place they left. */
function resume(kept, toPlace) {
  restoreAttempts(kept.attempts);
  const place = kept.position;
  const at = place ? view.scenes.findIndex((sc) => sc.id === place.sceneId) : -1;
  if (toPlace && place?.complete && at === view.scenes.length - 1 && !view.classroom.generatingRunId) {
    view.index = at;
    complete();
  } else if (toPlace && at >= 0) {
    go(at, { action: Number.isInteger(place.actionIndex) ? place.actionIndex : 0 });
  } else if (!view.done && view.scenes[view.index]?.type === "quiz" && kept.attempts.has(view.scenes[view.index].id)) {
    go(view.index); // the quiz on stage, with the answers kept
  }
  main.dataset.resumed = "true";
}

start();
