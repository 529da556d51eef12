// The classroom page (`/classroom/{id}`): a read-only classroom a learner goes through, one scene at a time —
// slides with the agents' script, quizzes to answer, interactive pages in a sandboxed frame.
//
// It reads `GET /api/classrooms/{id}`. While a run still writes the classroom (`generatingRunId`), it follows that
// run's events (`GET /api/generation-runs/{runId}/events`, resumed with Last-Event-ID across drops) and reads the
// classroom again on every `scene_ready`, `media`, `completed` and `ended`, so each scene appears as soon as it is
// written, announced to assistive technology. The reads are coalesced (one in flight, one more if events arrived
// meanwhile) and a read older than the one shown is dropped. Scenes already shown are updated in place and part by
// part — header, content, media, script — each rebuilt only when its own data changed, so a quiz keeps its answers,
// a script its line and an interactive page its frame while the rest of the classroom fills in.
//
// Keys: ← and → move between scenes (not while a form control or a player has the focus). The scene shown is in
// the address (`#scene-3`), so a reload or a shared link opens the same scene.

import { api, explain, fill, h } from "./api.js";
import { narration, sceneMedia } from "./classroom_media.js";
import { EventStream } from "./events.js";
import { sceneFrame } from "./sandbox.js";

const main = document.getElementById("main");
const announcer = document.getElementById("announcer");
const classroomId = decodeURIComponent(location.pathname.replace(/^\/classroom\//, "").replace(/\/+$/, ""));
const enc = encodeURIComponent;

const KIND_NAMES = { slide: "Slide", quiz: "Quiz", interactive: "Interactive page" };
const ROLE_NAMES = { teacher: "teacher", assistant: "teaching assistant", classmate: "classmate" };
const LETTERS = "ABCDEFGHIJ";
const FOLLOWED = new Set(["scene_ready", "media", "completed", "ended"]);
const CONNECTION_TEXT = { connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…" };

const view = {
  classroom: null, // the classroom shown
  index: 0, // the scene shown
  panels: new Map(), // scene id -> its panel
  runId: null, // the run writing the classroom, while one does
  run: null, // that run's snapshot (state, error)
  events: null, // the EventStream following it
};
const answers = new Map(); // `${sceneId}/${question}` -> {choice, checked}: kept across re-renders
const scriptLines = new Map(); // scene id -> the index of the script line in focus
let ui = null;
let nextId = 0;

function announce(text) {
  announcer.textContent = "";
  setTimeout(() => {
    announcer.textContent = text;
  }, 60);
}

// -- the frame of the page ---------------------------------------------------------------------------------------

function layout() {
  const title = h("h1", { tabindex: "-1" });
  const progress = h("p", { class: "progress-line" });
  const dot = h("span", { class: "dot", "aria-hidden": "true" });
  const connText = h("span", {});
  const connection = h("span", { class: "connection", title: "Connection to the server", hidden: true }, dot, connText);
  const notice = h("div", {});
  const navList = h("ol", { class: "scene-nav-list" });
  const stage = h("div", { class: "stage" });
  const prev = h("button", { type: "button", class: "button", onclick: () => go(view.index - 1, "pager") },
    h("span", { "aria-hidden": "true" }, "←"), "Previous scene");
  const next = h("button", { type: "button", class: "button primary", onclick: () => go(view.index + 1, "pager") },
    "Next scene", h("span", { "aria-hidden": "true" }, "→"));
  const position = h("p", { class: "position" });
  fill(main,
    h("div", { class: "classroom-head" }, h("div", {}, title, progress), connection),
    notice,
    h("div", { class: "classroom-body" },
      h("nav", { class: "scene-nav", "aria-label": "Scenes" }, navList),
      h("div", { class: "stage-column" },
        stage,
        h("div", { class: "pager", role: "group", "aria-label": "Move between scenes" }, prev, position, next),
        h("p", { class: "hint" }, "Keys: ← and → move between scenes."))));
  return {
    title, progress, notice, navList, stage, prev, next, position,
    connection(status) {
      connection.hidden = status === null;
      connection.className = `connection ${status || ""}`;
      connText.textContent = CONNECTION_TEXT[status] || "";
    },
  };
}

// -- one scene --------------------------------------------------------------------------------------------------

function scenePanel() {
  const uid = ++nextId;
  const navButton = h("button", { type: "button", class: "scene-link" });
  const navItem = h("li", {}, navButton);
  const kicker = h("p", { class: "scene-kicker" });
  const heading = h("h2", { id: `scene-title-${uid}`, class: "scene-title", tabindex: "-1" });
  const goal = h("p", { class: "scene-goal" });
  const content = h("div", { class: "scene-content" });
  const media = h("div", { class: "scene-media" });
  const script = h("div", { class: "scene-script" });
  const section = h("section", { class: "scene-panel", "aria-labelledby": heading.id, hidden: true },
    h("header", { class: "scene-header" }, kicker, heading, goal), content, media, script);
  const keys = {};
  const part = (name, key, el, build) => {
    if (keys[name] === key) return;
    keys[name] = key;
    fill(el, build());
  };
  const p = {
    uid, section, navItem, navButton, heading, scene: null,
    update(scene, i, n, agents) {
      p.scene = scene;
      const ready = scene.status === "ready";
      section.dataset.sceneId = scene.id;
      section.dataset.status = scene.status;
      navItem.dataset.status = scene.status;
      fill(navButton, h("span", { class: "scene-number" }, `${i + 1}.`), " ", scene.title,
        ready ? null : h("span", { class: "scene-state" }, " (being written)"));
      kicker.textContent = `${KIND_NAMES[scene.kind] || scene.kind} · Scene ${i + 1} of ${n}`;
      heading.textContent = scene.title;
      goal.textContent = scene.goal || "";
      const runState = writerState();
      part("content", JSON.stringify([scene.status, scene.content, ready ? "" : runState]), content,
        () => (ready ? sceneContent(scene, uid) : pendingContent(scene, runState)));
      part("media", JSON.stringify(scene.media || null), media, () => sceneMedia(scene));
      part("script", JSON.stringify([scene.actions, scene.narrationAssetId || null, agents]), script,
        () => sceneScript(scene, agents, section, uid));
    },
  };
  navButton.addEventListener("click", () => go(view.classroom.scenes.findIndex((s) => s.id === p.scene.id), "nav"));
  return p;
}

/** What the run writing the classroom is doing: its state while one does, else "ended". */
function writerState() {
  return view.classroom?.generatingRunId ? view.run?.state || "generating" : "ended";
}

function pendingContent(scene, runState) {
  const stopped = runState === "paused" || runState === "ended";
  const why = {
    paused: "This scene is not written yet: writing paused after a failure.",
    ended: "This scene was never written: the run that wrote this classroom ended.",
  }[runState] || "This scene is being written. It appears here by itself when it is ready.";
  return h("div", { class: "scene-pending" },
    h("p", { class: "working" }, stopped ? null : h("span", { class: "spinner", "aria-hidden": "true" }), why),
    scene.keyPoints?.length ? h("div", {}, h("p", { class: "meta" }, "It will cover:"),
      h("ul", { class: "key-points" }, scene.keyPoints.map((k) => h("li", {}, k)))) : null);
}

function sceneContent(scene, uid) {
  const c = scene.content;
  if (!c) return null;
  const titled = (t) => (t && t !== scene.title ? h("p", { class: "slide-title" }, t) : null);
  if (c.kind === "slide" && c.slide) {
    return h("div", { class: "slide" },
      titled(c.slide.title),
      h("ul", { class: "bullets" }, c.slide.bullets.map((b) => h("li", {}, b))),
      c.slide.notes ? h("details", {}, h("summary", {}, "Speaker notes"), h("p", {}, c.slide.notes)) : null);
  }
  if (c.kind === "quiz" && c.quiz) return quizContent(scene, c.quiz, uid);
  if (c.kind === "interactive" && c.interactive) {
    const it = c.interactive;
    return h("div", { class: "interactive" },
      titled(it.title),
      it.instructions ? h("p", { class: "instructions" }, it.instructions) : null,
      sceneFrame(it.html, `Interactive page: ${it.title || scene.title}`));
  }
  return null;
}

// -- quizzes ------------------------------------------------------------------------------------------------------

function quizContent(scene, quiz, uid) {
  const score = h("p", { class: "quiz-score", "aria-live": "polite" });
  const showScore = () => {
    const results = quiz.questions.map((q, i) => answers.get(`${scene.id}/${i}`));
    if (!results.every((r) => r?.checked)) return;
    const right = results.filter((r, i) => r.choice === quiz.questions[i].answer).length;
    score.textContent = `You answered ${right} of ${quiz.questions.length} correctly.`;
  };
  const questions = quiz.questions.map((q, i) => question(scene.id, i, q, `q${uid}-${i}`, showScore));
  showScore();
  return h("div", { class: "quiz" },
    quiz.title && quiz.title !== scene.title ? h("p", { class: "slide-title" }, quiz.title) : null,
    questions, score);
}

function question(sceneId, qi, q, name, onChecked) {
  const key = `${sceneId}/${qi}`;
  const saved = answers.get(key) || { choice: null, checked: false };
  answers.set(key, saved);
  const radios = q.options.map((_, i) => h("input", { type: "radio", name, id: `${name}-${i}`, value: String(i) }));
  const options = q.options.map((o, i) => h("li", { class: "option" }, radios[i],
    h("label", { for: radios[i].id }, h("span", { class: "letter", "aria-hidden": "true" }, LETTERS[i] || "•"), o)));
  const feedback = h("p", { class: "feedback", "aria-live": "polite" });
  const check = h("button", { type: "button", class: "button small" }, "Check answer");
  const showResult = () => {
    const right = saved.choice === q.answer;
    for (const r of radios) r.disabled = true;
    check.hidden = true;
    options[q.answer]?.classList.add("correct");
    if (!right) options[saved.choice]?.classList.add("wrong");
    feedback.className = `feedback ${right ? "right" : "wrong"}`;
    fill(feedback, h("strong", {}, right ? "Correct." : "Not quite."),
      right ? "" : ` The answer is ${LETTERS[q.answer] || ""}: ${q.options[q.answer] ?? ""}.`,
      q.explanation ? ` ${q.explanation}` : "");
  };
  radios.forEach((r, i) => r.addEventListener("change", () => {
    saved.choice = i;
    feedback.textContent = "";
  }));
  check.addEventListener("click", () => {
    if (saved.choice === null) {
      feedback.textContent = "Choose an answer first.";
      radios[0]?.focus();
      return;
    }
    saved.checked = true;
    showResult();
    onChecked();
  });
  if (saved.choice !== null && radios[saved.choice]) radios[saved.choice].checked = true;
  if (saved.checked) showResult();
  return h("fieldset", { class: "quiz-question" },
    h("legend", {}, `${qi + 1}. ${q.question}`),
    h("ul", { class: "options" }, options),
    h("div", { class: "question-actions" }, check),
    feedback);
}

// -- the script -------------------------------------------------------------------------------------------------

function scriptLine(a, agents) {
  const agent = agents.get(a.agentId);
  const role = agent ? ROLE_NAMES[agent.role] || agent.role : "";
  const speaker = h("span", { class: "speaker" }, agent?.name || a.agentId || "Teacher",
    role ? h("span", { class: "role" }, ` (${role})`) : null);
  const item = (...children) => h("li", { class: `line ${a.kind}`, dataset: { kind: a.kind } }, ...children);
  switch (a.kind) {
    case "highlight":
      return item(speaker, h("span", { class: "direction" }, " points to "), h("q", {}, a.text));
    case "pause":
      return item(h("span", { class: "direction" }, "Pause"), a.text ? `: ${a.text}` : "");
    case "ask":
      return item(speaker, h("span", { class: "direction" }, " asks: "), h("span", { class: "text" }, a.text));
    default:
      return item(speaker, ": ", h("span", { class: "text" }, a.text));
  }
}

function sceneScript(scene, agents, section, uid) {
  const actions = scene.actions?.actions || [];
  const audio = narration(scene, scene.title);
  if (!actions.length && !audio) return null;
  const byId = new Map((agents || []).map((a) => [a.id, a]));
  const items = actions.map((a) => scriptLine(a, byId));
  const at = h("p", { class: "line-position" });
  const prev = h("button", { type: "button", class: "button small" }, "Previous line");
  const next = h("button", { type: "button", class: "button small" }, "Next line");
  const set = (k) => {
    scriptLines.set(scene.id, k);
    items.forEach((el, i) => {
      el.classList.toggle("current", i === k);
      if (i === k) el.setAttribute("aria-current", "true");
      else el.removeAttribute("aria-current");
    });
    // A highlight points at one of the slide's bullets: show which.
    const pointed = actions[k]?.kind === "highlight" ? actions[k].text : null;
    for (const li of section.querySelectorAll(".bullets li")) li.classList.toggle("highlighted", li.textContent === pointed);
    at.textContent = `Line ${k + 1} of ${items.length}`;
    prev.disabled = k <= 0;
    next.disabled = k >= items.length - 1;
  };
  prev.addEventListener("click", () => set(Math.max(0, (scriptLines.get(scene.id) ?? 0) - 1)));
  next.addEventListener("click", () => set(Math.min(items.length - 1, (scriptLines.get(scene.id) ?? 0) + 1)));
  const hid = `script-title-${uid}`;
  const body = h("section", { class: "script", "aria-labelledby": hid }, h("h3", { id: hid }, "Script"), audio);
  if (items.length) {
    body.append(h("ol", { class: "lines" }, items),
      h("div", { class: "script-controls", role: "group", "aria-label": "Step through the script" }, prev, at, next));
    // Set after this part is in the page, so the slide's bullets it may point at are there too.
    queueMicrotask(() => set(Math.min(scriptLines.get(scene.id) ?? 0, items.length - 1)));
  }
  return body;
}

// -- the classroom as a whole --------------------------------------------------------------------------------------

function apply(classroom) {
  const before = view.classroom;
  view.classroom = classroom;
  const scenes = classroom.scenes;
  document.title = `${classroom.title || "Classroom"} · openmaic`;
  ui.title.textContent = classroom.title || "Untitled classroom";

  const ids = new Set(scenes.map((s) => s.id));
  for (const [id, p] of view.panels) {
    if (ids.has(id)) continue;
    p.section.remove();
    p.navItem.remove();
    view.panels.delete(id);
  }
  let section = null;
  let item = null;
  scenes.forEach((scene, i) => {
    let p = view.panels.get(scene.id);
    if (!p) {
      p = scenePanel();
      view.panels.set(scene.id, p);
    }
    // Place a panel only when it is out of place: moving a frame in the document would reload its page.
    const sectionAfter = section ? section.nextElementSibling : ui.stage.firstElementChild;
    if (sectionAfter !== p.section) ui.stage.insertBefore(p.section, sectionAfter);
    const itemAfter = item ? item.nextElementSibling : ui.navList.firstElementChild;
    if (itemAfter !== p.navItem) ui.navList.insertBefore(p.navItem, itemAfter);
    section = p.section;
    item = p.navItem;
    p.update(scene, i, scenes.length, classroom.agents || []);
  });

  if (before) {
    const wasReady = new Set(before.scenes.filter((s) => s.status === "ready").map((s) => s.id));
    const arrived = scenes.map((s, i) => [s, i]).filter(([s]) => s.status === "ready" && !wasReady.has(s.id));
    if (arrived.length) announce(arrivals(arrived, scenes));
  }
  view.index = Math.max(0, Math.min(view.index, scenes.length - 1));
  show();
  status();
  if (classroom.generatingRunId) follow(classroom.generatingRunId);
  else unfollow();
}

function arrivals(arrived, scenes) {
  const n = scenes.length;
  const done = scenes.every((s) => s.status === "ready");
  const [[first, i]] = arrived;
  const what = arrived.length === 1
    ? `Scene ${i + 1} of ${n} is ready: ${first.title}.`
    : `Scenes ${arrived.map(([, k]) => k + 1).join(", ")} of ${n} are ready.`;
  return done ? `${what} All ${n} scenes are ready.` : what;
}

function show() {
  const scenes = view.classroom.scenes;
  const n = scenes.length;
  scenes.forEach((s, i) => {
    const p = view.panels.get(s.id);
    p.section.hidden = i !== view.index;
    if (i === view.index) p.navButton.setAttribute("aria-current", "step");
    else p.navButton.removeAttribute("aria-current");
  });
  ui.prev.disabled = view.index <= 0;
  ui.next.disabled = view.index >= n - 1;
  ui.position.textContent = n ? `Scene ${view.index + 1} of ${n}` : "No scenes";
  main.dataset.scene = String(view.index + 1);
}

/** Show scene `index`; `how` says what asked (the focus follows a keyboard or list move, not a pager button). */
function go(index, how) {
  const scenes = view.classroom?.scenes || [];
  if (index < 0 || index >= scenes.length) return;
  view.index = index;
  history.replaceState(null, "", `#scene-${index + 1}`);
  show();
  const p = view.panels.get(scenes[index].id);
  const focused = document.activeElement;
  const kept = how === "pager" && (focused === ui.prev || focused === ui.next) && !focused.disabled;
  if (kept) announce(`Scene ${index + 1} of ${scenes.length}: ${scenes[index].title}`);
  else p.heading.focus();
}

function sceneInAddress(n) {
  const m = /^#scene-(\d+)$/.exec(location.hash);
  return m ? Math.max(0, Math.min(Number(m[1]) - 1, n - 1)) : 0;
}

function status() {
  const scenes = view.classroom.scenes;
  const n = scenes.length;
  const ready = scenes.filter((s) => s.status === "ready").length;
  const following = Boolean(view.classroom.generatingRunId);
  const state = following ? writerState() : ready === n ? "complete" : "incomplete";
  main.dataset.state = state;
  main.dataset.readyScenes = String(ready);
  main.dataset.totalScenes = String(n);
  if (state === "complete") ui.progress.textContent = `All ${n} scenes are ready.`;
  else if (state === "paused") ui.progress.textContent = `${ready} of ${n} scenes are ready.`;
  else if (following) {
    ui.progress.textContent = `${ready} of ${n} scenes are ready; the others are being written and appear here by themselves.`;
  } else ui.progress.textContent = `${ready} of ${n} scenes were written.`;
  if (state === "paused") {
    const message = view.run?.error?.message;
    fill(ui.notice, h("div", { class: "notice error", role: "alert" },
      h("p", {}, "Writing paused after a failure", message ? `: ${message}` : "."),
      h("p", {}, "The scenes written so far are here. The others appear by themselves once the run is retried: ",
        h("a", { href: `/#/runs/${enc(view.runId)}` }, "open the run in the workbench"), ".")));
  } else fill(ui.notice);
  for (const p of view.panels.values()) {
    const i = scenes.findIndex((s) => s.id === p.scene.id);
    if (i >= 0) p.update(p.scene, i, n, view.classroom.agents || []); // a pending scene says why it waits
  }
}

// -- reading and following ---------------------------------------------------------------------------------------

let reading = null;
let readAgain = false;

/** Read the classroom again (one read at a time; asking during one makes one more after it). */
function refresh() {
  if (reading) {
    readAgain = true;
    return;
  }
  reading = (async () => {
    do {
      readAgain = false;
      try {
        const { classroom } = await api("GET", `/api/classrooms/${enc(classroomId)}`);
        if (!view.classroom || classroom.seq >= view.classroom.seq) apply(classroom);
      } catch (err) {
        if (err.status === 404) return notFound();
        fill(ui.notice, h("div", { class: "notice error", role: "alert" }, h("p", {}, explain(err))));
      }
    } while (readAgain);
  })().finally(() => {
    reading = null;
  });
}

async function readRun() {
  try {
    view.run = (await api("GET", `/api/generation-runs/${enc(view.runId)}`)).run;
  } catch (err) {
    if (err.status !== 404) throw err;
    view.run = null; // gone with its classroom, or never ours: the classroom's read says which
  }
  status();
}

async function follow(runId) {
  if (view.runId === runId) return;
  unfollow();
  view.runId = runId;
  try {
    await readRun();
  } catch {
    // the events below carry the state too
  }
  if (view.runId !== runId) return; // the classroom moved on meanwhile
  view.events = new EventStream(`/api/generation-runs/${enc(runId)}/events`, {
    after: view.run?.seq ?? 0,
    onFrame(type, frame) {
      if (type === "state") {
        view.run = { ...(view.run || {}), state: frame.data.state };
        if (frame.data.state === "paused") readRun().catch(() => {});
        status();
      }
      if (FOLLOWED.has(type)) refresh();
    },
    onCaughtUp: refresh, // whatever happened between the classroom's read and this connection
    onConnection: ui.connection,
    onGone: refresh,
  }).start();
}

function unfollow() {
  view.events?.stop();
  view.events = null;
  view.runId = null;
  ui?.connection(null);
}

function notFound() {
  unfollow();
  document.title = "Classroom not found · openmaic";
  main.dataset.state = "not-found";
  fill(main,
    h("h1", { tabindex: "-1" }, "Classroom not found"),
    h("p", {}, "There is no classroom at this address, or it is not yours."),
    h("p", {}, h("a", { href: "/" }, "Go to your courses")));
  main.setAttribute("aria-busy", "false");
}

/** The server wants to know who is asking (an access token, or its access code) before it shows anything. */
function signInFirst(err) {
  document.title = "Sign in · openmaic";
  main.dataset.state = "sign-in";
  fill(main,
    h("h1", { tabindex: "-1" }, "Sign in first"),
    h("p", {}, `This server answered: ${explain(err).replace(/\.$/, "")}.`),
    h("p", {}, h("a", { href: "/" }, "Sign in on the workbench"), ", then open this page again."));
  main.setAttribute("aria-busy", "false");
}

document.addEventListener("keydown", (e) => {
  if (!view.classroom || e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
  if (e.target instanceof Element && e.target.closest("input, textarea, select, audio, video, [contenteditable]")) return;
  if (e.key === "ArrowRight") go(view.index + 1, "key");
  else if (e.key === "ArrowLeft") go(view.index - 1, "key");
  else return;
  e.preventDefault();
});

window.addEventListener("hashchange", () => {
  if (view.classroom) go(sceneInAddress(view.classroom.scenes.length), "key");
});

async function start() {
  let classroom;
  try {
    ({ classroom } = await api("GET", `/api/classrooms/${enc(classroomId)}`));
  } catch (err) {
    if (err.status === 404) return notFound();
    if (err.status === 401) return signInFirst(err);
    fill(main, h("div", { class: "notice error", role: "alert" },
      h("p", {}, `The classroom could not be loaded: ${explain(err)}`),
      h("p", {}, h("button", { type: "button", class: "button", onclick: () => location.reload() }, "Try again"))));
    main.setAttribute("aria-busy", "false");
    return;
  }
  ui = layout();
  view.index = sceneInAddress(classroom.scenes.length);
  apply(classroom);
  main.setAttribute("aria-busy", "false");
}

start();
