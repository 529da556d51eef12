// The web workbench: library, new course, run, course and Pro session views, routed by the URL's #fragment.

import {
  SIGN_IN_NEEDED, accessToken, api, clearAccessToken, commandId, explain, fill, h, setAccessToken,
} from "./api.js";
import { courseAgents, courseScenes, sceneBody, sceneScript, slideCanvas } from "./doc.js";
import {
  foldRun, foldSession, runFromSnapshot, runLabel, runOutline, sceneIdInProgress, scenesCompleted, sessionBusy,
  sessionFromMeta, sessionLabel,
} from "./fold.js";
import { LANGUAGES, dateTime, language, number, setLanguage, t, tn, translatePage } from "./i18n.js";
import { outlineEditor, outlineToSend, readDraft, SCENE_TYPES } from "./outline_editor.js";
import { LibraryFeed, StreamSocket } from "./stream.js";
import { toolDetails, toolProblem, toolSentence } from "./tool_words.js";

const main = document.getElementById("main");
const announcer = document.getElementById("announcer");
let leave = null; // the current view's cleanup
let navigated = false;

// -- small shared pieces ------------------------------------------------------------------------------------------

function announce(text) {
  announcer.textContent = "";
  setTimeout(() => {
    announcer.textContent = text;
  }, 60);
}

/** Call `fn` once soon, however often this is asked for before then (events arrive in bursts). */
function batched(fn) {
  let timer = null;
  return () => {
    if (timer === null) {
      timer = setTimeout(() => {
        timer = null;
        fn();
      }, 30);
    }
  };
}

const CONNECTION_TEXT = {
  connecting: t("Connecting…"),
  live: t("Live"),
  reconnecting: t("Reconnecting…"),
  gone: t("No longer available"),
  error: t("Offline"),
};

/** A small "Live / Reconnecting…" indicator. */
function connectionIndicator() {
  const text = h("span", {}, CONNECTION_TEXT.connecting);
  const el = h("span", { class: "connection connecting", title: t("Connection to the server") }, h("span", { class: "dot", "aria-hidden": "true" }), text);
  return {
    el,
    set(status) {
      el.className = `connection ${status}`;
      text.textContent = CONNECTION_TEXT[status] || status;
    },
  };
}

function heading(text) {
  return h("h1", { tabindex: "-1" }, text);
}

function stateClass(label) {
  if (!label) return "state-none";
  if (label.startsWith("generating")) return "state-generating";
  return `state-${label.replace(/[^a-z]+/g, "-")}`;
}

/** A state's words in the page's language ("generating 3/8" keeps its numbers). */
function labelText(label) {
  const m = /^generating (\d+)\/(\d+)$/.exec(label || "");
  return m ? t("generating {done}/{total}", { done: Number(m[1]), total: Number(m[2]) }) : t(label || "");
}

function badge(label) {
  return h("span", { class: `badge ${stateClass(label)}` }, labelText(label));
}

function setBadge(el, label) {
  el.className = `badge ${stateClass(label)}`;
  el.textContent = labelText(label);
}

function errorBox(message, ...extra) {
  return h("div", { class: "notice error", role: "alert" }, h("p", {}, message), ...extra);
}

const KIND_NAMES = Object.fromEntries(SCENE_TYPES);

function kindName(type) {
  return t(KIND_NAMES[type] || type);
}

/** The description the outline gives a scene (the document's outline, by the scene's id). */
function outlineOf(classroom, id) {
  return (classroom?.outline?.outlines || []).find((o) => o.id === id) || null;
}

// -- library ------------------------------------------------------------------------------------------------------

/** The classroom page of a course (OpenMAIC's result.url): what learners open. */
function classroomUrl(courseId) {
  return `/classroom/${encodeURIComponent(courseId)}`;
}

/** A language tag's name in the page's language ("Chinese (China)", "中文（中国）"). */
function languageName(tag) {
  try {
    return new Intl.DisplayNames([language()], { type: "language" }).of(tag) || tag;
  } catch {
    return tag;
  }
}

function cardTarget(card) {
  if (card.label === "ready" || !card.runId) return `#/courses/${encodeURIComponent(card.id)}`;
  return `#/runs/${encodeURIComponent(card.runId)}`;
}

function libraryView() {
  document.title = t("Your courses · openmaic");
  const conn = connectionIndicator();
  const list = h("ul", { class: "cards", "aria-label": t("Courses") });
  const empty = h("div", { class: "empty", hidden: true },
    h("p", {}, t("No courses yet.")),
    h("a", { class: "button primary", href: "#/new" }, t("Create your first course")));
  const problem = h("div", {});
  const search = h("input", { id: "library-search", type: "search", autocomplete: "off" });
  const sort = h("select", { id: "library-sort" },
    h("option", { value: "date" }, t("Newest first")), h("option", { value: "name" }, t("Name")));
  const noMatch = h("p", { class: "hint", hidden: true });
  fill(main,
    h("div", { class: "view-head" }, heading(t("Your courses")), conn.el),
    h("div", { class: "toolbar" },
      h("p", { class: "lead" }, t("Each card is one course. Courses being written update here by themselves.")),
      h("a", { class: "button primary", href: "#/new" }, t("New course"))),
    h("div", { class: "library-tools" },
      h("div", { class: "field" }, h("label", { for: "library-search" }, t("Search by title")), search),
      h("div", { class: "field" }, h("label", { for: "library-sort" }, t("Sort by")), sort)),
    problem, empty, noMatch, list);
  let latest = [];
  const shown = new Map(); // classroom id -> {el, update}
  const feed = new LibraryFeed({
    onConnection(status, err) {
      conn.set(status);
      if (status === "error") fill(problem, errorBox(explain(err)));
      else if (status === "live") fill(problem);
    },
    onCards(cards) {
      latest = cards;
      feedCards(cards);
    },
  });
  function feedCards(all) {
    const q = search.value.trim().toLocaleLowerCase();
    const collator = new Intl.Collator(language());
    const cards = all.filter((c) => !q || (c.title || "").toLocaleLowerCase().includes(q));
    if (sort.value === "name") cards.sort((a, b) => collator.compare(a.title || "", b.title || ""));
    noMatch.hidden = !(q && all.length && !cards.length);
    noMatch.textContent = t("No course matches “{q}”.", { q: search.value.trim() });
    const ids = new Set(cards.map((c) => c.id));
    for (const [id, c] of shown) {
      if (!ids.has(id)) {
        c.el.remove();
        shown.delete(id);
      }
    }
    let before = null;
    for (let i = cards.length - 1; i >= 0; i--) {
      const card = cards[i];
      let c = shown.get(card.id);
      if (!c) {
        c = courseCard(card, feed, problem);
        shown.set(card.id, c);
      } else c.update(card);
      // Move a card only when it is out of place: moving the element that holds the focus would drop it.
      if (c.el.nextElementSibling !== before || c.el.parentNode !== list) list.insertBefore(c.el, before);
      before = c.el;
    }
    empty.hidden = all.length > 0;
  }

  search.addEventListener("input", () => feedCards(latest));
  sort.addEventListener("change", () => feedCards(latest));
  feed.start();
  return () => feed.stop();
}

function courseCard(card, feed, problem) {
  const link = h("a", { class: "card-link" });
  const label = h("span", {});
  const progress = h("progress", { "aria-label": t("Scenes written") });
  const updated = h("p", { class: "meta" });
  const open = h("a", { class: "button small primary" }, t("Open"));
  const enter = h("a", { class: "button small" }, t("Enter the classroom"));
  const pro = h("a", { class: "button small" }, t("Ask the agent"));
  const del = h("button", { type: "button", class: "button small danger-outline" }, t("Delete"));
  const picture = h("a", { class: "card-picture", tabindex: "-1", "aria-hidden": "true" });
  const resume = h("a", { class: "button small primary" }, t("Resume the review"));
  const languageNote = h("span", { class: "kind card-language" });
  const el = h("li", { class: "card" },
    picture,
    h("h2", { class: "card-title" }, link),
    h("div", { class: "card-status" }, label, languageNote, progress),
    updated,
    h("div", { class: "card-actions" }, resume, open, enter, pro, del));
  let pictureAt = null;
  /** The first slide, drawn small from the course document (read again when the course changed). */
  async function drawPicture(c) {
    if (pictureAt === c.updatedAt || c.scenesCompleted < 1) return;
    pictureAt = c.updatedAt;
    try {
      const { classroom: doc } = await api("GET", `/api/classrooms/${encodeURIComponent(c.id)}`);
      const slide = doc.scenes.find((x) => x.content?.type === "slide");
      fill(picture, slide ? slideCanvas(slide.content.canvas, doc.media, { small: true, label: slide.title }) : null);
      languageNote.textContent = doc.language ? languageName(doc.language) : "";
    } catch {
      pictureAt = null; // tried again on the next change
    }
  }
  let current = card;
  del.addEventListener("click", async () => {
    if (!window.confirm(`Delete the course “${current.title}”? This cannot be undone.`)) return;
    del.disabled = true;
    try {
      await api("DELETE", `/api/classrooms/${encodeURIComponent(current.id)}?commandId=${commandId()}`);
      feed.remove(current.id);
      announce(`Deleted “${current.title}”.`);
      main.focus();
    } catch (err) {
      del.disabled = false;
      fill(problem, errorBox(`Could not delete “${current.title}”: ${explain(err)}`));
    }
  });
  function update(c) {
    current = c;
    link.textContent = c.title || t("Untitled course");
    link.href = cardTarget(c);
    open.href = link.href;
    const name = c.title || t("Untitled course");
    open.setAttribute("aria-label", t("Open “{name}”", { name }));
    setBadge(label, c.label);
    const generating = c.label.startsWith("generating");
    progress.hidden = !generating;
    progress.max = Math.max(1, c.scenesTotal);
    progress.value = c.scenesCompleted;
    updated.textContent = [
      c.scenesTotal ? tn(c.scenesTotal, "{count} scene", "{count} scenes") : "",
      c.updatedAt ? t("Updated {date}", { date: dateTime(c.updatedAt) }) : "",
    ].filter(Boolean).join(" · ");
    // A run waiting for its outline to be confirmed: resume the review, or discard it (Delete).
    const awaiting = c.runState === "awaiting_outline_confirmation" || c.label === "waiting for confirmation";
    resume.hidden = !awaiting;
    open.hidden = awaiting;
    resume.href = link.href;
    del.textContent = awaiting ? t("Discard") : t("Delete");
    picture.href = link.href;
    drawPicture(c);
    // The classroom opens as soon as its first scene is written (the rest arrive while the learner is in it).
    enter.hidden = c.scenesCompleted < 1;
    enter.href = classroomUrl(c.id);
    enter.setAttribute("aria-label", t("Enter the classroom of “{name}”", { name }));
    pro.hidden = c.label !== "ready";
    pro.href = `#/courses/${encodeURIComponent(c.id)}`;
    pro.setAttribute("aria-label", t("Ask the agent to change “{name}”", { name }));
    del.setAttribute("aria-label", t(awaiting ? "Discard “{name}”" : "Delete “{name}”", { name }));
    el.dataset.courseId = c.id;
  }
  update(card);
  return { el, update };
}

// -- new course ---------------------------------------------------------------------------------------------------

const REVIEW_CHOICES = [
  ["wait", t("Let me review the outline first"), t("Writing stops after the outline until you confirm it. You can change titles and goals.")],
  ["countdown", t("Show me the outline, then continue by itself"), t("You get a few seconds to look at the outline before the scenes are written.")],
  ["auto", t("Write the whole course straight away"), t("No stop after the outline.")],
];

/** The slots a run may choose a model for, in the order the run calls them, as a teacher names them. */
const MODEL_SLOTS = {
  "course.outline": "Outline model", "course.agents": "Agents model", "course.content.slide": "Slides model",
  "course.content.quiz": "Quizzes model", "course.content.interactive": "Interactive pages model",
  "course.actions": "Script model",
};

/** What reading a material found: its pages and characters (or that it is a picture). */
function readWhat(m) {
  return [
    m.pages ? tn(m.pages, "{count} page", "{count} pages") : null,
    m.characters ? tn(m.characters, "{count} character read", "{count} characters read") : t("a picture"),
  ].filter(Boolean).join(", ");
}

function newCourseView() {
  document.title = t("New course · openmaic");
  const requirement = h("textarea", {
    id: "requirement", name: "requirement", rows: 5, required: true, "aria-describedby": "requirement-hint",
    placeholder: t("For example: Photosynthesis for 12-year-olds, with a short quiz at the end"),
  });
  const files = h("input", {
    id: "materials", type: "file", multiple: true, "aria-describedby": "materials-hint",
    accept: ".pdf,.txt,.md,.markdown,image/png,image/jpeg,image/gif,image/webp,application/pdf,text/plain,text/markdown",
  });
  const materialList = h("ul", { class: "material-list", "aria-live": "polite" });
  const status = h("p", { class: "form-status", role: "status" });
  const problem = h("div", {});
  const submit = h("button", { type: "submit", class: "button primary" }, t("Create course"));
  const radios = REVIEW_CHOICES.map(([value, text, hint], i) => h("div", { class: "choice" },
    h("input", { type: "radio", name: "outline_review", id: `review-${value}`, value, checked: i === 0, "aria-describedby": `review-${value}-hint` }),
    h("label", { for: `review-${value}` }, text),
    h("p", { class: "hint", id: `review-${value}-hint` }, hint)));
  const courseLanguage = h("select", { id: "course-language" },
    h("option", { value: "" }, t("Detect from the request")),
    h("option", { value: "en" }, "English"), h("option", { value: "zh-CN" }, "中文（简体）"));
  const interactive = h("input", { id: "interactive", type: "checkbox", "aria-describedby": "interactive-hint" });
  const webSearch = h("input", { id: "web-search", type: "checkbox", checked: true, "aria-describedby": "web-search-hint" });
  const agentIds = h("input", { id: "agent-ids", type: "text", autocomplete: "off", placeholder: "default-1, default-2", disabled: true });
  const agentChoices = [["auto", "Chosen for the topic"], ["preset", "The usual classroom"], ["custom", "These agents (by id)"]]
    .map(([value, text], i) => h("div", { class: "choice" },
      h("input", { type: "radio", name: "agents", id: `agents-${value}`, value, checked: i === 0 }),
      h("label", { for: `agents-${value}` }, t(text))));
  // Materials uploaded before, to use again: each shows what was read from it (GET /api/materials).
  const earlierList = h("ul", { class: "material-list" });
  const earlier = h("fieldset", { class: "field", hidden: true, "aria-describedby": "earlier-hint" },
    h("legend", {}, t("Your earlier materials")),
    h("p", { class: "hint", id: "earlier-hint" }, t("Tick the ones this course should also be written from.")),
    earlierList);
  // The model of each step: "as in your settings" unless the teacher picks another the settings allow.
  const modelSelects = new Map(); // slot -> <select>
  const models = h("fieldset", { class: "field model-choices", hidden: true, "aria-describedby": "models-hint" },
    h("legend", {}, t("Models")),
    h("p", { class: "hint", id: "models-hint" }, t("Each step uses the model your settings give it, unless you choose another one here.")));
  const form = h("form", { class: "stack", novalidate: false },
    h("div", { class: "field" },
      h("label", { for: "requirement" }, t("What should the course teach?")),
      h("p", { class: "hint", id: "requirement-hint" }, t("Describe the topic and who it is for. A sentence or two is enough.")),
      requirement),
    h("div", { class: "field" },
      h("label", { for: "materials" }, t("Materials (optional)")),
      h("p", { class: "hint", id: "materials-hint" }, t("PDF, text, Markdown or images. The course is written from what they say.")),
      files,
      materialList),
    earlier,
    h("div", { class: "field" }, h("label", { for: "course-language" }, t("Course language")), courseLanguage),
    h("div", { class: "field" }, h("span", { class: "check" }, interactive, h("label", { for: "interactive" }, t("Interactive scenes"))),
      h("p", { class: "hint", id: "interactive-hint" }, t("Add interactive pages (simulations, exercises) where they help."))),
    h("div", { class: "field" }, h("span", { class: "check" }, webSearch, h("label", { for: "web-search" }, t("Search the web"))),
      h("p", { class: "hint", id: "web-search-hint" }, t("Look the topic up on the web before writing the outline (when your settings give a web search)."))),
    h("fieldset", { class: "field" }, h("legend", {}, t("Teachers and classmates")), agentChoices,
      h("div", { class: "field" }, h("label", { for: "agent-ids" }, t("Agent ids, separated by commas")), agentIds)),
    h("fieldset", { class: "field" }, h("legend", {}, t("Outline review")), radios),
    models,
    problem,
    h("div", { class: "actions" }, submit, h("a", { class: "button", href: "#/" }, t("Back to the library"))),
    status);
  fill(main, h("div", { class: "view-head" }, heading(t("New course"))), form);

  api("GET", "/api/materials?limit=50").then(({ materials }) => {
    for (const m of materials) {
      const id = `earlier-${m.materialId}`;
      earlierList.append(h("li", { class: "material" },
        h("span", { class: "check" }, h("input", { type: "checkbox", id, value: m.materialId }),
          h("label", { for: id }, m.originalName)),
        " — ", h("span", {}, readWhat(m)),
        m.excerpt ? h("p", { class: "hint excerpt" }, `“${m.excerpt}”`) : ""));
    }
    earlier.hidden = materials.length === 0;
  }, () => {}); // without the list the form still works: new uploads only
  api("GET", "/api/model-config/run-choices").then(({ slots }) => {
    for (const s of slots) {
      const others = s.allowed.filter((m) => m !== s.default);
      if (!others.length || !(s.slot in MODEL_SLOTS)) continue; // nothing to choose (or a slot set by the server)
      const id = `model-${s.slot.replaceAll(".", "-")}`;
      const select = h("select", { id, "data-slot": s.slot },
        h("option", { value: "" }, s.default ? t("As in your settings ({model})", { model: s.default }) : t("As in your settings")),
        others.map((m) => h("option", { value: m }, m)));
      modelSelects.set(s.slot, select);
      models.append(h("div", { class: "field" }, h("label", { for: id }, t(MODEL_SLOTS[s.slot])), select));
    }
    models.hidden = modelSelects.size === 0;
  }, () => {}); // without the choices every step follows the settings

  // Each file is read as soon as it is chosen: the teacher sees what was understood (pages, the first words) or
  // why it could not be read, before starting the course.
  let uploads = []; // {name, promise -> materialId | null}
  files.addEventListener("change", () => {
    fill(materialList);
    uploads = [...files.files].map((file) => {
      const item = h("li", { class: "material" }, h("strong", {}, file.name), " — ", h("span", {}, t("Reading…")));
      materialList.append(item);
      const body = new FormData();
      body.append("file", file, file.name);
      const promise = api("POST", "/api/materials", { form: body }).then((m) => {
        item.lastChild.replaceWith(h("span", {}, `✓ ${readWhat(m)}`), m.excerpt ? h("p", { class: "hint excerpt" }, `“${m.excerpt}”`) : "");
        item.classList.add("material-ok");
        return m.materialId;
      }, (err) => {
        item.lastChild.replaceWith(h("span", { class: "tool-error" }, `✗ ${t("Not read: {reason}", { reason: explain(err) })}`));
        item.classList.add("material-refused");
        return null;
      });
      return { name: file.name, promise };
    });
  });
  form.addEventListener("change", () => {
    agentIds.disabled = !form.querySelector("#agents-custom").checked;
  });
  /** The run's `agents` input: chosen for the topic, the preset classroom, or the agents named by id. */
  function agentsInput() {
    const mode = form.querySelector("input[name=agents]:checked").value;
    if (mode === "auto") return { mode: "auto" };
    if (mode === "preset") return { mode: "preset", agentIds: ["default-1", "default-2", "default-3"] };
    return { mode: "preset", agentIds: agentIds.value.split(",").map((x) => x.trim()).filter(Boolean) };
  }
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    fill(problem);
    const text = requirement.value.trim();
    if (!text) {
      fill(problem, errorBox(t("Describe what the course should teach.")));
      requirement.focus();
      return;
    }
    submit.disabled = true;
    try {
      status.textContent = t("Reading the materials…");
      const ids = await Promise.all(uploads.map((u) => u.promise));
      const refused = uploads.filter((u, i) => ids[i] === null).map((u) => u.name);
      if (refused.length) {
        status.textContent = "";
        submit.disabled = false;
        fill(problem, errorBox(t("Some materials could not be read ({names}). Remove or replace them, then create the course.", { names: refused.join(", ") })));
        return;
      }
      const picked = [...earlierList.querySelectorAll("input:checked")].map((x) => x.value);
      const materialIds = [...new Set([...ids, ...picked])];
      const chosen = Object.fromEntries([...modelSelects].filter(([, sel]) => sel.value).map(([slot, sel]) => [slot, sel.value]));
      status.textContent = t("Starting…");
      const review = form.querySelector("input[name=outline_review]:checked").value;
      const started = await api("POST", "/api/generation-runs", {
        json: {
          requirement: text, outlineReview: review, materialIds, language: courseLanguage.value,
          interactive: interactive.checked, agents: agentsInput(), enableWebSearch: webSearch.checked, models: chosen,
        },
      });
      location.hash = `#/runs/${encodeURIComponent(started.run.id)}`;
    } catch (err) {
      status.textContent = "";
      submit.disabled = false;
      fill(problem, errorBox(explain(err)));
    }
  });
  return null;
}

// -- a generation run ---------------------------------------------------------------------------------------------

function draftKey(runId, revision) {
  return `openmaic:outline:${runId}:${revision}`;
}

function runView(runId) {
  document.title = t("Course in progress · openmaic");
  const conn = connectionIndicator();
  const title = heading(t("Loading…"));
  const requirement = h("p", { class: "requirement" });
  const chosenModels = h("p", { class: "hint chosen-models" });
  const label = badge("preparing");
  const progress = h("progress", { hidden: true, "aria-label": t("Scenes written") });
  const progressText = h("span", { class: "progress-text" });
  const alerts = h("div", {});
  const outlineHead = h("h2", { id: "outline-heading" }, t("Outline"));
  const outlineBody = h("div", {});
  const done = h("div", {});
  const otherDevice = h("div", {});
  fill(main,
    h("div", { class: "view-head" }, title, conn.el),
    requirement,
    chosenModels,
    h("div", { class: "status-row" }, label, progress, progressText),
    alerts,
    otherDevice,
    done,
    h("section", { "aria-labelledby": "outline-heading" }, outlineHead, outlineBody));

  let state = null;
  let shownKey = "";
  let alertKey = "";
  let caughtUp = false;
  let lastState = null;
  let countdownTimer = null;
  const sceneCache = new Map(); // scene id -> {key, el}
  let confirmedHere = false; // this page sent the confirmation (else another device did)
  let otherDeviceShown = false;
  let classroom = null; // the course being written: the scenes' content comes from it
  let classroomSeq = -1;

  const sock = new StreamSocket(runId, {
    probe: `/api/generation-runs/${encodeURIComponent(runId)}`,
    onEvent(e) {
      state = foldRun(state, e);
      if (e.type === "outline_ready" && state.outlineReview === "countdown") refreshSnapshot();
      if (e.type === "scene_ready" || e.type === "course_created" || e.type === "completed") reloadClassroom();
      render();
    },
    onCaughtUp() {
      caughtUp = true;
      render();
    },
    onConnection: conn.set,
  });

  async function refreshSnapshot() {
    // What events do not repeat: the moment a countdown confirms by itself.
    try {
      const { run } = await api("GET", `/api/generation-runs/${encodeURIComponent(runId)}`);
      if (!stopped && state && state.proposedRevision === run.outline?.revision) {
        state = { ...state, countdownUntil: run.outlineAutoConfirmAt || null };
        shownKey = "";
        render();
      }
    } catch {
      // the events go on; the countdown is only not shown
    }
  }

  const reloadClassroom = batched(async () => {
    if (!state?.courseId) return;
    try {
      const { classroom: c } = await api("GET", `/api/classrooms/${encodeURIComponent(state.courseId)}`);
      if (stopped || c.seq === classroomSeq) return;
      classroomSeq = c.seq;
      classroom = c;
      // No clearing of the list: a written scene's cache key holds classroomSeq, so the next render replaces
      // each written scene in place. Emptied here, the list stayed empty until that (batched) render ran.
      render();
    } catch {
      // shown again on the next scene
    }
  });

  const render = batched(() => {
    const s = state;
    if (!s) return;
    title.textContent = s.title || t("New course");
    document.title = `${s.title || t("New course")} · openmaic`;
    requirement.textContent = s.requirement ? t("You asked for: {requirement}", { requirement: s.requirement }) : "";
    const chosen = Object.entries(s.models).map(([slot, model]) => `${t(MODEL_SLOTS[slot] || slot)}: ${model}`);
    chosenModels.textContent = chosen.length ? t("Models chosen for this course: {list}", { list: chosen.join(" · ") }) : "";
    chosenModels.hidden = !chosen.length;
    const text = runLabel(s);
    setBadge(label, text);
    main.dataset.runState = s.state;
    main.dataset.seq = String(s.seq);
    const total = s.scenes.length;
    const completed = scenesCompleted(s);
    progress.hidden = !total;
    progress.max = Math.max(1, total);
    progress.value = completed;
    progressText.textContent = total ? t("{completed} of {total} scenes written", { completed, total }) : "";
    renderAlerts(s);
    renderOutline(s);
    renderDone(s);
    if (caughtUp && lastState !== null && lastState !== s.state) {
      if (s.state === "awaiting_outline_confirmation") announce(t("The outline is ready for your review."));
      else if (s.state === "completed") announce(t("The course is ready."));
      else if (s.state === "paused") announce(t("Writing paused after a failure."));
    }
    if (caughtUp) lastState = s.state;
  });

  function renderAlerts(s) {
    const key = `${s.state}:${s.error}:${s.retryRequested}:${s.stopRequested}`;
    if (key === alertKey) return;
    alertKey = key;
    if (s.state === "paused") {
      const retry = h("button", { type: "button", class: "button primary", disabled: s.retryRequested },
        s.retryRequested ? t("Retrying…") : t("Retry"));
      const note = h("p", { class: "form-status", role: "status" });
      retry.addEventListener("click", async () => {
        retry.disabled = true;
        retry.textContent = t("Retrying…");
        try {
          await sock.send({ type: "retry" });
        } catch (err) {
          retry.disabled = false;
          retry.textContent = t("Retry");
          note.textContent = explain(err);
        }
      });
      fill(alerts, h("div", { class: "notice error", role: "alert" },
        h("p", {}, h("strong", {}, "Writing paused after a failure. ")),
        h("p", {}, s.error || t("A step failed.")),
        s.failedStep ? h("p", { class: "hint" }, `Failed step: ${stepName(s.failedStep)}. Retry runs only that step again.`) : null,
        h("div", { class: "actions" }, retry), note));
    } else if (s.state === "ended" || s.stopRequested) {
      fill(alerts, h("div", { class: "notice" }, h("p", {}, t("This course was deleted, so writing stopped."))));
    } else {
      fill(alerts);
    }
  }

  function renderOutline(s) {
    if (s.confirmedRevision) {
      if (caughtUp) confirmedElsewhere(s);
      if (shownKey !== "scenes") {
        shownKey = "scenes";
        outlineHead.textContent = t("Scenes");
        fill(outlineBody, h("ol", { class: "scenes" }));
        sceneCache.clear();
      }
      renderScenes(s, outlineBody.firstChild);
      return;
    }
    if (s.proposedRevision && s.state === "awaiting_outline_confirmation") {
      const key = `review:${s.proposedRevision}`;
      if (shownKey !== key) {
        shownKey = key;
        outlineHead.textContent = t("Review the outline");
        fill(outlineBody, reviewForm(s));
      }
      return;
    }
    const items = runOutline(s);
    const busy = !s.proposedRevision && ["preparing", "outlining"].includes(s.state);
    const key = `list:${items.length}:${busy}:${s.proposedRevision}`;
    if (shownKey === key) return;
    shownKey = key;
    outlineHead.textContent = t("Outline");
    fill(outlineBody,
      h("ol", { class: "outline", "aria-busy": busy ? "true" : "false" }, items.map((item) => outlineEntry(item))),
      busy ? h("p", { class: "working" }, h("span", { class: "spinner", "aria-hidden": "true" }),
        s.state === "preparing" ? t("Getting ready…") : t("Writing the outline…")) : null);
  }

  function outlineEntry(item) {
    return h("li", { class: "outline-item" },
      h("p", { class: "item-title" }, item.title, " ", h("span", { class: "kind" }, kindName(item.type))),
      h("p", { class: "item-goal" }, item.description || ""));
  }

  /** The outline was confirmed on another device while this page held unsaved changes: say so, and let the
   * teacher keep those changes (shown here, to reuse) or drop them. */
  function confirmedElsewhere(s) {
    if (confirmedHere || otherDeviceShown) return;
    const key = draftKey(runId, s.proposedRevision);
    const draft = readDraft(key);
    if (!draft || JSON.stringify(draft) === JSON.stringify(s.proposed)) return;
    otherDeviceShown = true;
    const keep = h("button", { type: "button", class: "button" }, t("Keep my changes"));
    const drop = h("button", { type: "button", class: "button danger-outline" }, t("Drop my changes"));
    const kept = h("ol", { class: "kept-draft", hidden: true }, draft.map((o) => h("li", {},
      h("strong", {}, o.title), ` (${kindName(o.type)})`, o.description ? ` — ${o.description}` : "")));
    const actions = h("div", { class: "actions" }, keep, drop);
    fill(otherDevice, h("div", { class: "notice warning", role: "alert" },
      h("p", {}, h("strong", {}, s.confirmedEdited ? t("The outline was confirmed with changes on another device.")
        : t("The outline was confirmed on another device."))),
      h("p", {}, t("Your unsaved changes on this page were not used. The course is being written from the confirmed outline.")),
      actions, kept));
    keep.addEventListener("click", () => {
      kept.hidden = false;
      actions.replaceWith(h("p", { class: "hint" }, t("Your changes are kept below: you can ask the agent to apply them once the course is ready.")));
    });
    drop.addEventListener("click", () => {
      sessionStorage.removeItem(key);
      fill(otherDevice);
      announce(t("Your changes were dropped."));
    });
  }

  function reviewForm(s) {
    const key = draftKey(runId, s.proposedRevision);
    const status = h("p", { class: "form-status", role: "status" });
    const confirm = h("button", { type: "submit", class: "button primary" }, t("Confirm outline and write the course"));
    const countdown = h("p", { class: "countdown", hidden: true });
    const editor = outlineEditor(s.proposed, key);
    const form = h("form", { class: "review" },
      h("p", {}, t("Check the outline. Add, remove or reorder scenes and change any of them, then confirm: the scenes are written after that.")),
      countdown,
      editor.el,
      h("div", { class: "actions" }, confirm),
      status);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      if (!form.reportValidity()) return;
      const outlines = outlineToSend(editor.items().map((o) => ({ ...o, title: o.title.trim() })));
      const changed = JSON.stringify(outlines) !== JSON.stringify(outlineToSend(s.proposed));
      confirm.disabled = true;
      status.textContent = t("Confirming…");
      confirmedHere = true;
      try {
        const command = { type: "confirm_outline", outlineRevision: s.proposedRevision };
        // The entries go back whole (media requests, quiz settings and all): only what was edited changes.
        if (changed) command.outlines = outlines;
        await sock.send(command);
        sessionStorage.removeItem(key);
        status.textContent = t("Confirmed. Writing the scenes…");
      } catch (err) {
        confirmedHere = false;
        confirm.disabled = false;
        status.textContent = t("Not confirmed: {reason}", { reason: explain(err) });
      }
    });
    clearInterval(countdownTimer);
    if (s.countdownUntil) {
      const until = Date.parse(s.countdownUntil);
      const tick = () => {
        const left = Math.ceil((until - Date.now()) / 1000);
        countdown.hidden = false;
        countdown.textContent = left > 0
          ? tn(left, "Continues by itself in {count} second unless you confirm first.", "Continues by itself in {count} seconds unless you confirm first.")
          : t("Continuing with this outline…");
      };
      tick();
      countdownTimer = setInterval(tick, 1000);
    }
    return form;
  }

  /** The scenes as the course document has them, by id and in its order (an agent may have reordered, renamed,
   * added or removed scenes since this run wrote them); the run's confirmed outline until the course exists. */
  function renderScenes(s, list) {
    const entries = classroom ? courseScenes(classroom)
      : s.confirmed.map((o) => ({ id: o.id, title: o.title, type: o.type, order: o.order, scene: null }));
    const working = sceneIdInProgress(s);
    const ids = new Set(entries.map((e) => e.id));
    for (const [id, c] of sceneCache) {
      if (!ids.has(id)) {
        c.el.remove();
        sceneCache.delete(id);
      }
    }
    entries.forEach((e, i) => {
      const ready = Boolean(e.scene);
      const failed = s.state === "paused" && e.id === working && !ready;
      const status = ready ? "ready" : e.id === working && s.state === "generating"
        ? (s.step?.endsWith(":actions") ? "finishing" : "writing") : "waiting";
      const key = [i, status, failed, e.title, e.type, ready ? classroomSeq : -1].join("\u001f");
      let cached = sceneCache.get(e.id);
      if (!cached || cached.key !== key) {
        const description = (outlineOf(classroom, e.id) || s.confirmed.find((o) => o.id === e.id))?.description;
        const el = h("li", { class: `scene scene-${failed ? "failed" : status}`, dataset: { status: failed ? "failed" : status, sceneId: e.id } },
          h("div", { class: "scene-head" },
            h("h3", {}, `${number(i + 1)}. ${e.title}`),
            h("span", { class: "kind" }, kindName(e.type)),
            h("span", { class: `scene-status ${failed ? "failed" : status}` },
              failed ? `✗ ${t("failed")}` :
              status === "ready" ? `✓ ${t("ready")}` :
              status === "finishing" ? t("writing the script…") :
              status === "writing" ? t("writing…") : t("waiting"))),
          description ? h("p", { class: "item-goal" }, description) : null,
          ready ? sceneBody(e.scene, classroom.media) : null,
          ready ? sceneScript(e.scene, courseAgents(classroom)) : null);
        if (cached) cached.el.replaceWith(el);
        cached = { key, el };
        sceneCache.set(e.id, cached);
      }
      if (list.children[i] !== cached.el) list.insertBefore(cached.el, list.children[i] || null);
    });
  }

  function renderDone(s) {
    // The classroom can be entered once its first scene is written; the rest arrive there live.
    const enterable = Boolean(s.courseId) && scenesCompleted(s) > 0 && s.state !== "ended" && !s.stopRequested;
    const key = `${s.state}:${s.courseId}:${enterable}`;
    if (done.dataset.key === key) return;
    done.dataset.key = key;
    const enter = enterable ? h("a", { class: "button", href: classroomUrl(s.courseId) }, t("Enter the classroom")) : null;
    if (s.state !== "completed") {
      fill(done, enter && h("div", { class: "notice" },
        h("p", {}, t("The first scenes are ready: learners can start while the rest are written.")),
        h("div", { class: "actions" }, enter)));
      return;
    }
    const course = `#/courses/${encodeURIComponent(s.courseId)}`;
    fill(done, h("div", { class: "notice success" },
      h("p", {}, h("strong", {}, t("The course is ready."))),
      h("div", { class: "actions" },
        h("a", { class: "button primary", href: course }, t("Open the course")),
        enter,
        h("a", { class: "button", href: "#/" }, t("Back to the library")))));
  }

  // An HTTP call first: the snapshot to fold events onto, a missing run is a clear message, and an anonymous
  // owner gets its cookie.
  let stopped = false;
  api("GET", `/api/generation-runs/${encodeURIComponent(runId)}`).then(
    ({ run }) => {
      if (stopped) return;
      state = runFromSnapshot(run);
      sock.seq = run.seq;
      if (state.courseId) reloadClassroom();
      render();
      sock.start();
    },
    (err) => {
      if (stopped) return;
      conn.set(err.status === 404 ? "gone" : "error");
      title.textContent = err.status === 404 ? t("Course not found") : "Could not load this course";
      fill(alerts, errorBox(err.status === 404 ? t("There is no such course in your library. It may have been deleted.") : explain(err),
        h("a", { href: "#/" }, t("Back to the library"))));
    },
  );
  return () => {
    stopped = true;
    clearInterval(countdownTimer);
    sock.stop();
  };
}

function stepName(step) {
  const m = /^scene:(\d+):(content|actions)$/.exec(step || "");
  if (m) return `scene ${Number(m[1]) + 1} ${m[2] === "content" ? "content" : "script"}`;
  return step;
}

// -- a course -----------------------------------------------------------------------------------------------------

const SESSION_WORDS = { queued: "starting…", running: "working…", idle: "waiting for you", waiting: "waiting for you", succeeded: "waiting for you", cancelled: "cancelled", failed: "stopped after an error" };
const BY_WORDS = { run: "course writing", agent: "the agent", browser: "a browser save", restore: "a restore", teacher: "a manual edit" };

/** A version in one line: what changed, about which scene. */
function versionSummary(v) {
  const title = v.title || "";
  switch (v.change) {
    case "created": return t("Created the course “{title}”", { title });
    case "retitled": return t("Renamed the course to “{title}”", { title });
    case "outline": return t("Set the outline");
    case "agents": return t("Chose the classroom's teachers");
    case "scene_written": return t("Wrote the scene “{title}”", { title });
    case "scene_finished": return t("Finished the scene “{title}” (script and narration)", { title });
    case "scene_added": return t("Added the scene “{title}”", { title });
    case "scene_changed": return t("Changed the scene “{title}”", { title });
    case "scene_deleted": return t("Removed the scene “{title}”", { title });
    case "reordered": return t("Reordered the scenes");
    case "media_done": return t("Added a picture or video to “{title}”", { title });
    case "media_failed": return t("A picture or video for “{title}” could not be made", { title });
    case "document": return t("Saved the whole course");
    case "stage": return t("Saved the course settings");
    case "restored": return v.fromAt ? t("Restored the version of {date}", { date: dateTime(v.fromAt) }) : t("Restored an earlier version");
    default: return v.change;
  }
}

function courseView(courseId) {
  document.title = t("Course · openmaic");
  const conn = connectionIndicator();
  const title = heading(t("Loading…"));
  const meta = h("div", { class: "course-meta" });
  const body = h("div", {});
  const problem = h("div", {});
  const message = h("textarea", {
    id: "pro-message", rows: 3, required: true, "aria-describedby": "pro-hint",
    placeholder: t("For example: add a quiz about chlorophyll after the second scene"),
  });
  const start = h("button", { type: "submit", class: "button primary" }, t("Start"));
  const startStatus = h("p", { class: "form-status", role: "status" });
  const proForm = h("form", { class: "panel stack", "aria-labelledby": "pro-heading" },
    h("h2", { id: "pro-heading" }, t("Change it with the agent")),
    h("div", { class: "field" },
      h("label", { for: "pro-message" }, t("What should change?")),
      h("p", { class: "hint", id: "pro-hint" }, t("The agent edits this course: it can add, rewrite, reorder or remove scenes. You can follow its work and stop it.")),
      message),
    h("div", { class: "actions" }, start),
    startStatus);
  fill(main, h("div", { class: "view-head" }, title, conn.el), meta, problem, proForm, body);

  proForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = message.value.trim();
    if (!text) {
      startStatus.textContent = t("Write what the agent should do first.");
      message.focus();
      return;
    }
    start.disabled = true;
    startStatus.textContent = t("Starting…");
    try {
      const session = await api("POST", "/api/agent/sessions", { json: { prompt: text, stageId: courseId } });
      location.hash = `#/sessions/${encodeURIComponent(session.id)}`;
    } catch (err) {
      start.disabled = false;
      startStatus.textContent = explain(err);
    }
  });

  let stopped = false;
  let sock = null;
  let loadedSeq = -1;
  const reload = batched(load);

  async function load() {
    let course;
    try {
      course = (await api("GET", `/api/classrooms/${encodeURIComponent(courseId)}`)).classroom;
    } catch (err) {
      if (stopped) return;
      title.textContent = err.status === 404 ? t("Course not found") : t("Could not load the course");
      fill(problem, errorBox(err.status === 404 ? t("There is no such course in your library. It may have been deleted.") : explain(err),
        h("a", { href: "#/" }, t("Back to the library"))));
      proForm.hidden = true;
      conn.set(err.status === 404 ? "gone" : "error");
      return;
    }
    if (stopped || course.seq === loadedSeq) return;
    loadedSeq = course.seq;
    render(course);
    if (!sock) {
      // The course's own stream says when it changes (a run writing it, an agent editing it).
      sock = new StreamSocket(courseId, {
        probe: `/api/classrooms/${encodeURIComponent(courseId)}`,
        onEvent: () => {
          if (sock.live) reload();
        },
        onCaughtUp: () => reload(),
        onConnection: conn.set,
      });
      sock.seq = course.seq;
      sock.start();
    }
  }

  function render(doc) {
    const name = doc.stage.name || t("Untitled course");
    title.textContent = name;
    document.title = `${name} · openmaic`;
    const entries = courseScenes(doc);
    const agents = courseAgents(doc);
    const ready = doc.scenes.length;
    fill(meta,
      doc.stage.description ? h("p", { class: "requirement" }, doc.stage.description) : null,
      h("p", { class: "meta" }, tn(entries.length, "{count} scene", "{count} scenes"),
        ready < entries.length ? ` (${t("{count} ready", { count: ready })})` : "",
        agents.length ? ` · ${t("Classroom: {names}", { names: agents.map((a) => `${a.name} (${a.role})`).join(", ") })}` : ""),
      h("p", {}, h("a", { class: "button small", href: classroomUrl(courseId) }, t("Enter the classroom"))));
    // While a run writes the course it is read-only to the agent: point to the run instead.
    proForm.hidden = Boolean(doc.generatingRunId);
    fill(problem, doc.generatingRunId ? h("div", { class: "notice" },
      h("p", {}, t("This course is still being written. You can change it with the agent once it is ready.")),
      h("p", {}, h("a", { href: `#/runs/${encodeURIComponent(doc.generatingRunId)}` }, t("Follow its progress")))) : null);
    fill(body,
      h("section", { "aria-labelledby": "course-outline-heading" },
        h("h2", { id: "course-outline-heading" }, t("Outline")),
        h("ol", { class: "toc" }, entries.map((e, i) => h("li", {},
          h("a", { href: `#/courses/${encodeURIComponent(courseId)}`, onclick: (ev) => { ev.preventDefault(); document.getElementById(`scene-${i}`)?.focus(); } }, e.title),
          " ", h("span", { class: "kind" }, kindName(e.type)))))),
      h("section", { "aria-labelledby": "course-scenes-heading" },
        h("h2", { id: "course-scenes-heading" }, t("Scenes")),
        h("ol", { class: "scenes" }, entries.map((e, i) => h("li", { class: `scene scene-${e.scene ? "ready" : "pending"}`, dataset: { sceneId: e.id } },
          h("div", { class: "scene-head" },
            h("h3", { id: `scene-${i}`, tabindex: "-1" }, `${number(i + 1)}. ${e.title}`),
            h("span", { class: "kind" }, kindName(e.type)),
            e.scene ? null : h("span", { class: "scene-status waiting" }, t("not written yet"))),
          outlineOf(doc, e.id)?.description ? h("p", { class: "item-goal" }, outlineOf(doc, e.id).description) : null,
          sceneBody(e.scene, doc.media),
          sceneScript(e.scene, agents))))),
      sessionsPanel,
      historyPanel);
    loadSessions();
    loadHistory();
  }

  // -- the course's Pro sessions and its versions -------------------------------------------------------------

  const sessionsPanel = h("section", { class: "panel", "aria-labelledby": "sessions-heading" },
    h("h2", { id: "sessions-heading" }, t("Earlier sessions with the agent")), h("div", {}));
  const historyPanel = h("section", { class: "panel history", "aria-labelledby": "history-heading" },
    h("h2", { id: "history-heading" }, t("Version history")),
    h("p", { class: "hint" }, t("Every change to the course is a version. Restoring one adds it again as the newest version: nothing is lost.")),
    h("div", {}));
  let versions = [];

  async function restore(seq, what) {
    try {
      await api("POST", `/api/classrooms/${encodeURIComponent(courseId)}/restore`, { json: { seq, commandId: commandId() } });
      announce(t("Restored {what}.", { what }));
      reload();
    } catch (err) {
      fill(problem, errorBox(t("Could not restore: {reason}", { reason: explain(err) })));
    }
  }

  async function loadSessions() {
    let list;
    try {
      list = await api("GET", "/api/agent/sessions?limit=100");
    } catch {
      return; // the course is shown without its sessions
    }
    const mine = (Array.isArray(list) ? list : list.sessions || []).filter((x) => x.stageId === courseId);
    const box = sessionsPanel.lastChild;
    if (!mine.length) {
      fill(box, h("p", { class: "hint" }, t("No sessions yet.")));
      return;
    }
    fill(box, h("ul", { class: "session-list" }, mine.map((x) => {
      const undo = h("button", { type: "button", class: "button small" }, t("Undo this session"));
      undo.hidden = !versions.some((v) => v.sessionId === x.id);
      undo.addEventListener("click", () => {
        // Read when clicked: the versions may have loaded after this list.
        const edits = versions.filter((v) => v.sessionId === x.id);
        if (!edits.length) return;
        const first = Math.min(...edits.map((v) => v.seq));
        const before = versions.filter((v) => v.seq < first).sort((a, b) => b.seq - a.seq)[0];
        if (before) restore(before.seq, t("the course as it was before this session"));
      });
      return h("li", {},
        h("a", { href: `#/sessions/${encodeURIComponent(x.id)}` }, x.title || t("Session of {date}", { date: dateTime(x.createdAt) })),
        " ", h("span", { class: "meta" }, `${labelText(SESSION_WORDS[x.status] || x.status)} · ${dateTime(x.createdAt)}`),
        " ", undo);
    })));
  }

  async function loadHistory() {
    const box = historyPanel.lastChild;
    try {
      versions = (await api("GET", `/api/classrooms/${encodeURIComponent(courseId)}/history?limit=200`)).versions;
    } catch (err) {
      fill(box, h("p", { class: "hint" }, explain(err)));
      return;
    }
    const newest = versions[0]?.seq;
    for (const v of versions) if (v.fromSeq) v.fromAt = versions.find((x) => x.seq === v.fromSeq)?.at;
    fill(box, h("ol", { class: "versions" }, versions.map((v) => {
      const back = h("button", { type: "button", class: "button small", hidden: v.seq === newest }, t("Restore"));
      back.setAttribute("aria-label", t("Restore the version of {date}", { date: dateTime(v.at) }));
      back.addEventListener("click", () => restore(v.seq, t("the version of {date}", { date: dateTime(v.at) })));
      return h("li", { dataset: { seq: String(v.seq) } },
        h("span", { class: "version-summary" }, versionSummary(v)),
        h("span", { class: "meta" }, ` · ${t(BY_WORDS[v.by] || v.by)} · ${dateTime(v.at)}`),
        v.seq === newest ? h("span", { class: "badge state-ready" }, t("current")) : back);
    })));
    if (sessionsPanel.isConnected) loadSessionsUndo();
  }

  function loadSessionsUndo() {
    for (const li of sessionsPanel.querySelectorAll("li")) {
      const id = decodeURIComponent(li.querySelector("a")?.getAttribute("href")?.split("/").pop() || "");
      const undo = li.querySelector("button");
      if (undo) undo.hidden = !versions.some((v) => v.sessionId === id);
    }
  }

  load();
  return () => {
    stopped = true;
    sock?.stop();
  };
}

// -- a Pro workbench session --------------------------------------------------------------------------------------

const TOOL_STATES = { planned: "about to run", running: "running…", ok: "done", error: "failed", interrupted: "stopped" };

function sessionItem(item, titles) {
  switch (item.kind) {
    case "user":
      return h("li", { class: "msg user" },
        h("p", { class: "who" }, t("You"), item.delivered ? null : h("span", { class: "pending" }, ` · ${t("not read yet")}`)),
        h("p", { class: "text" }, item.text));
    case "assistant":
      return h("li", { class: "msg assistant" }, h("p", { class: "who" }, t("Agent")), h("p", { class: "text" }, item.text));
    case "notice":
      return h("li", { class: `msg ended ${item.status}` }, h("p", { class: "text" },
        item.status === "cancelled" ? t("Stopped because you cancelled. Anything the agent had not finished was not applied.") : t(item.text)));
    case "tool": {
      if (item.name === "ask_user" && item.state === "ok") {
        const q = item.result?.question || item.arguments?.question || "";
        return h("li", { class: "msg assistant question" }, h("p", { class: "who" }, t("Agent asks")), h("p", { class: "text" }, q));
      }
      const problem = item.state === "error" || item.state === "interrupted" ? toolProblem(item) : "";
      return h("li", { class: `msg tool tool-${item.state}`, dataset: { tool: item.name || "", state: item.state } },
        h("p", { class: "tool-head" },
          h("span", { class: "tool-icon", "aria-hidden": "true" }, item.state === "ok" ? "✓" : item.state === "error" || item.state === "interrupted" ? "✗" : "⚙"),
          h("span", { class: "tool-name" }, toolSentence(item, titles)),
          item.state === "ok" ? null : h("span", { class: "tool-state" }, ` — ${t(TOOL_STATES[item.state] || item.state)}`)),
        problem ? h("p", { class: "tool-error" }, problem) : null,
        toolDetails(item));
    }
    default:
      return h("li", {});
  }
}

function itemKey(item) {
  return JSON.stringify([item.kind, item.seq, item.callId, item.state, item.delivered, item.text]);
}

function sessionView(sessionId) {
  document.title = t("Agent workbench · openmaic");
  const conn = connectionIndicator();
  const title = heading(t("Agent workbench"));
  const courseLink = h("a", {}, "the course");
  const status = badge("starting…");
  const log = h("ol", { class: "log", role: "log", "aria-label": t("Conversation with the agent"), tabindex: "0" });
  const draft = h("div", { class: "msg assistant draft", hidden: true, "aria-hidden": "true" },
    h("p", { class: "who" }, "Agent ", h("span", { class: "typing" }, "is writing…")), h("p", { class: "text" }));
  const working = h("p", { class: "working", hidden: true }, h("span", { class: "spinner", "aria-hidden": "true" }), t("The agent is working…"));
  const input = h("textarea", {
    id: "composer-input", rows: 3, "aria-describedby": "composer-hint",
    placeholder: t("Ask for a change, for example: add a scene about chlorophyll"),
  });
  const send = h("button", { type: "submit", class: "button primary" }, t("Send"));
  const cancel = h("button", { type: "button", class: "button danger" }, t("Cancel"));
  const composerStatus = h("p", { class: "form-status", role: "status" });
  const problem = h("div", {});
  const scenes = h("ol", { class: "scene-list" });
  const storeKey = `openmaic:composer:${sessionId}`;
  input.value = sessionStorage.getItem(storeKey) || "";
  const composer = h("form", { class: "composer" },
    h("label", { for: "composer-input" }, t("Message to the agent")),
    input,
    h("p", { class: "hint", id: "composer-hint" }, t("Enter sends, Shift+Enter starts a new line. You can write while the agent works: it reads your message at its next step.")),
    h("div", { class: "actions" }, send, cancel),
    composerStatus);
  fill(main,
    h("div", { class: "view-head" }, title, conn.el),
    h("p", { class: "status-row" }, "Editing ", courseLink, " · ", status),
    problem,
    h("div", { class: "workbench" },
      h("section", { class: "chat", "aria-labelledby": "chat-heading" },
        h("h2", { id: "chat-heading", class: "visually-hidden" }, t("Conversation")),
        log, draft, working, composer),
      h("aside", { class: "panel course-panel", "aria-labelledby": "scenes-heading" },
        h("h2", { id: "scenes-heading" }, t("Scenes of the course")), scenes)));

  let state = null;
  let caughtUp = false;
  let courseSeq = -1;
  let lastEdited = -1;
  let lastStatus = null;
  const cache = []; // index -> {key, el}
  const titles = new Map(); // every scene id the course has had -> its latest title (a deleted scene keeps its name)
  let titlesVersion = 0;
  let stick = true; // keep the newest message in view, unless the reader scrolled up
  log.addEventListener("scroll", () => {
    stick = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  });
  const onResize = () => {
    if (stick) log.scrollTop = log.scrollHeight;
  };
  window.addEventListener("resize", onResize);

  const sock = new StreamSocket(sessionId, {
    probe: `/api/agent/sessions/${encodeURIComponent(sessionId)}`,
    onEvent(e) {
      state = foldSession(state, e);
      render();
    },
    onCaughtUp() {
      caughtUp = true;
      render();
    },
    onConnection: conn.set,
  });

  const render = batched(() => {
    const s = state;
    if (!s) return;
    main.dataset.sessionStatus = s.status;
    main.dataset.seq = String(s.seq);
    setBadge(status, sessionLabel(s));
    s.items.forEach((item, i) => {
      const key = item.kind === "tool" ? `${itemKey(item)}:${titlesVersion}` : itemKey(item);
      if (cache[i]?.key === key) return;
      const el = sessionItem(item, titles);
      if (cache[i]) cache[i].el.replaceWith(el);
      else log.append(el);
      cache[i] = { key, el };
    });
    draft.hidden = !s.draft;
    draft.lastChild.textContent = s.draft;
    working.hidden = !(sessionBusy(s) && !s.draft);
    working.lastChild.textContent = s.cancelRequested ? t("Cancelling…") : t("The agent is working…");
    cancel.disabled = !sessionBusy(s) || s.cancelRequested;
    if (stick) log.scrollTop = log.scrollHeight;
    if (s.courseId && (courseSeq < 0 || (caughtUp && (s.editedAt !== lastEdited || s.status !== lastStatus)))) {
      lastEdited = s.editedAt;
      refreshCourse(s.courseId);
    }
    if (caughtUp && lastStatus !== null && lastStatus !== s.status) {
      if (s.status === "succeeded") announce(t("The agent is done and waiting for you."));
      else if (s.status === "cancelled") announce(t("The agent was cancelled."));
      else if (s.status === "failed") announce(t("The agent stopped after an error."));
    }
    if (caughtUp) lastStatus = s.status;
  });

  async function refreshCourse(courseId) {
    courseSeq = Math.max(courseSeq, 0);
    courseLink.href = `#/courses/${encodeURIComponent(courseId)}`;
    try {
      const course = (await api("GET", `/api/classrooms/${encodeURIComponent(courseId)}`)).classroom;
      if (course.seq === courseSeq) return;
      courseSeq = course.seq;
      courseLink.textContent = `“${course.stage.name || t("Untitled course")}”`;
      const entries = courseScenes(course);
      for (const e of entries) {
        if (titles.get(e.id) !== e.title) titlesVersion += 1;
        titles.set(e.id, e.title);
      }
      fill(scenes, entries.map((sc) => h("li", { dataset: { sceneId: sc.id } },
        h("span", {}, sc.title), " ", h("span", { class: "kind" }, kindName(sc.type)),
        sc.scene ? null : h("span", { class: "scene-status waiting" }, ` ${t("not written yet")}`))));
      render(); // tool calls name scenes by id: they are redrawn with the titles now known
    } catch (err) {
      fill(scenes, h("li", {}, explain(err)));
    }
  }

  async function post() {
    const text = input.value.trim();
    if (!text) {
      composerStatus.textContent = t("Write a message first.");
      input.focus();
      return;
    }
    input.value = "";
    sessionStorage.removeItem(storeKey);
    composerStatus.textContent = t("Sending…");
    try {
      await sock.send({ type: "message", text }); // the server decides: steer the turn in flight, or queue
      composerStatus.textContent = "";
    } catch (err) {
      if (!input.value) input.value = text;
      composerStatus.textContent = `Not sent: ${explain(err)}`;
    }
  }

  composer.addEventListener("submit", (ev) => {
    ev.preventDefault();
    post();
  });
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      post();
    }
  });
  input.addEventListener("input", () => sessionStorage.setItem(storeKey, input.value));
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    composerStatus.textContent = t("Cancelling…");
    try {
      await sock.send({ type: "cancel" });
      state = { ...state, cancelRequested: true };
      render();
      composerStatus.textContent = "";
    } catch (err) {
      composerStatus.textContent = `Could not cancel: ${explain(err)}`;
      render();
    }
  });

  let stopped = false;
  api("GET", `/api/agent/sessions/${encodeURIComponent(sessionId)}`).then(
    (meta) => {
      if (stopped) return;
      state = sessionFromMeta(meta);
      if (meta.stageId) refreshCourse(meta.stageId);
      sock.start();
    },
    (err) => {
      if (stopped) return;
      conn.set(err.status === 404 ? "gone" : "error");
      fill(problem, errorBox(err.status === 404 ? "There is no such session." : explain(err), h("a", { href: "#/" }, t("Back to the library"))));
    },
  );
  return () => {
    stopped = true;
    window.removeEventListener("resize", onResize);
    sock.stop();
  };
}

// -- signing in (identity.mode token) -----------------------------------------------------------------------------

let signingIn = false; // the sign-in form is showing: the 401s it causes itself must not re-open it

function signInView(expired) {
  document.title = t("Sign in · openmaic");
  const input = h("input", {
    id: "access-token", name: "access-token", type: "password", autocomplete: "off", spellcheck: "false",
    required: true, "aria-describedby": "access-token-hint",
  });
  const problem = h("div", {});
  const submit = h("button", { type: "submit", class: "button primary" }, t("Sign in"));
  const form = h("form", { class: "stack" },
    h("div", { class: "field" },
      h("label", { for: "access-token" }, t("Access token")),
      h("p", { class: "hint", id: "access-token-hint" },
        t("This server asks for an access token. Paste the one your administrator made for you (it begins with tok_).")),
      input),
    problem,
    h("div", { class: "actions" }, submit));
  fill(main,
    h("div", { class: "view-head" }, heading(t("Sign in"))),
    expired ? h("p", { class: "lead" }, t("The access token this browser used is no longer accepted.")) : null,
    form);
  input.focus();

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    fill(problem);
    const token = input.value.trim();
    if (!token) {
      fill(problem, errorBox(t("Paste your access token.")));
      input.focus();
      return;
    }
    submit.disabled = true;
    setAccessToken(token);
    try {
      await api("GET", "/api/classrooms"); // proves the token before any view relies on it
    } catch (err) {
      clearAccessToken();
      submit.disabled = false;
      fill(problem, errorBox(err.status === 401
        ? t("That token is unknown or has been revoked. Ask your administrator for a new one.")
        : explain(err)));
      input.focus();
      return;
    }
    announce(t("Signed in."));
    route();
  });
  return null;
}

const signOut = document.getElementById("sign-out");

function showSignOut() {
  signOut.hidden = !accessToken();
}

signOut.addEventListener("click", () => {
  clearAccessToken();
  showSignOut();
  announce(t("Signed out."));
  if (location.hash && location.hash !== "#/") location.hash = "#/";
  else route();
});

window.addEventListener(SIGN_IN_NEEDED, () => {
  if (signingIn) return;
  const expired = accessToken() !== null;
  clearAccessToken(); // a token the server refuses is of no further use
  if (leave) leave();
  leave = null;
  signingIn = true;
  showSignOut();
  leave = signInView(expired);
});

// -- routing ------------------------------------------------------------------------------------------------------

function notFoundView() {
  document.title = t("Not found · openmaic");
  fill(main, heading(t("Page not found")), h("p", {}, h("a", { href: "#/" }, t("Go to your courses"))));
  return null;
}

const ROUTES = [
  [/^#?\/?$/, libraryView, "library"],
  [/^#\/new$/, newCourseView, "new"],
  [/^#\/runs\/([^/]+)$/, runView, null],
  [/^#\/courses\/([^/]+)$/, courseView, null],
  [/^#\/sessions\/([^/]+)$/, sessionView, null],
];

function route() {
  if (leave) leave();
  leave = null;
  signingIn = false;
  showSignOut();
  const hash = location.hash || "#/";
  let nav = null;
  let view = notFoundView;
  let args = [];
  for (const [re, fn, name] of ROUTES) {
    const m = re.exec(hash);
    if (m) {
      view = fn;
      nav = name;
      args = m.slice(1).map(decodeURIComponent);
      break;
    }
  }
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === nav) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  delete main.dataset.runState;
  delete main.dataset.sessionStatus;
  delete main.dataset.seq;
  leave = view(...args);
  // After a navigation, start reading (and tabbing) at the new view's heading.
  if (navigated) main.querySelector("h1")?.focus();
  navigated = true;
}

const languageSelect = document.getElementById("language");
for (const [code, name] of LANGUAGES) languageSelect.append(h("option", { value: code, lang: code, selected: code === language() }, name));
languageSelect.addEventListener("change", () => {
  setLanguage(languageSelect.value);
  location.reload(); // every view and constant is built again in the new language
});
translatePage();

document.getElementById("skip-link").addEventListener("click", (ev) => {
  ev.preventDefault();
  (main.querySelector("h1") || main).focus();
});
window.addEventListener("hashchange", route);
route();
