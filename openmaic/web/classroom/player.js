// One scene on stage: its view (slide canvas, quiz, interactive frame), the effects and whiteboard over it, the
// speaker panel, the controls (play/pause, replay, previous/next, speed, autoplay, keyboard) and the timeline of
// its actions, and the engine that runs them (engine.js).

import { createSpeaker, teacherOf } from "./agents.js";
import { createCanvas } from "./canvas.js";
import { discussionTask } from "./discussion.js";
import { createEffects } from "./effects.js";
import { Engine, mediaTask, readingTime, timerTask } from "./engine.js";
import { t } from "./i18n.js";
import { interactiveFrame } from "./interactive.js";
import { quizView } from "./quiz.js";
import { actionsOf, assetUrl, h } from "./util.js";
import { createWhiteboard } from "./whiteboard.js";

export const SPEEDS = [0.75, 1, 1.25, 1.5, 2];
export const AUTOPLAY_DELAY_MS = 1500;
const VIDEO_LIMIT_MS = 5 * 60 * 1000;

const settings = { speed: 1, autoplay: true };
const consumed = new Set(); // discussion action ids already offered on this page

function actionLabel(a) {
  if (a.type === "speech") return a.text || "…";
  if (a.type === "discussion") return a.topic || a.type;
  return a.title || a.type.replace(/_/g, " ");
}

/**
 * The player: `show(scene, ctx)` puts a scene on stage (ctx: `{classroom, agents, index, total, onNext, onPrev,
 * onEnd}`), `refresh(scene, ctx)` redraws it in place when the document changed, `engine` is the current one.
 */
export function createPlayer(root) {
  const host = h("div", { class: "canvas-host" });
  const canvas = createCanvas(host);
  const effects = createEffects(canvas);
  const whiteboard = createWhiteboard(canvas);
  const speaker = createSpeaker();
  const sheet = h("div", { class: "scene-sheet" }); // quiz and pending views
  const cards = h("div", { class: "card-host" });
  const playBtn = h("button", { type: "button", class: "button primary play", "aria-keyshortcuts": "Space" });
  const replayBtn = h("button", { type: "button", class: "button", "aria-keyshortcuts": "R" }, t("replay"));
  const prevBtn = h("button", { type: "button", class: "button", "aria-keyshortcuts": "ArrowLeft" },
    h("span", { "aria-hidden": "true" }, "← "), t("prev"));
  const nextBtn = h("button", { type: "button", class: "button", "aria-keyshortcuts": "ArrowRight" }, t("next"),
    h("span", { "aria-hidden": "true" }, " →"));
  const speed = h("select", { id: "speed", class: "speed" },
    SPEEDS.map((v) => h("option", { value: String(v), selected: v === settings.speed }, `${v}×`)));
  const autoplay = h("input", { type: "checkbox", id: "autoplay", checked: settings.autoplay });
  const timeline = h("ol", { class: "timeline" });
  const controls = h("div", { class: "controls", role: "group", "aria-label": t("scenes") },
    prevBtn, playBtn, replayBtn, nextBtn,
    h("label", { class: "control-label", for: "speed" }, t("speed")), speed,
    h("label", { class: "control-label" }, autoplay, ` ${t("autoplay")}`));
  const stage = h("div", { class: "stage-area" }, host, sheet, cards);
  root.append(stage, speaker.panel, controls,
    h("details", { class: "timeline-box", open: true }, h("summary", {}, t("timeline")), timeline),
    h("p", { class: "hint" }, t("shortcuts")));

  const state = { scene: null, ctx: null, engine: null, frame: null, key: "", timer: null };

  const syncControls = () => {
    const e = state.engine;
    const playing = e?.mode === "playing";
    playBtn.replaceChildren(h("span", { "aria-hidden": "true" }, playing ? "❚❚ " : "▶ "), t(playing ? "pause" : "play"));
    playBtn.disabled = !e;
    replayBtn.disabled = !e;
    playBtn.setAttribute("aria-pressed", playing ? "true" : "false");
    root.dataset.mode = e?.mode || "none";
    root.dataset.action = e ? String(e.index) : "";
    [...timeline.children].forEach((li, i) => {
      li.classList.toggle("current", !!e && i === e.index && !e.finished);
      li.classList.toggle("done", !!e && (i < e.index || e.finished));
      const b = li.firstChild;
      if (!!e && i === e.index && !e.finished) b.setAttribute("aria-current", "step");
      else b.removeAttribute("aria-current");
    });
    prevBtn.disabled = state.ctx ? state.ctx.index <= 0 : true;
    nextBtn.disabled = state.ctx ? state.ctx.index >= state.ctx.total - 1 && !state.ctx.canFinish : true;
  };

  const perform = (a, i, { silent }) => {
    const scene = state.scene;
    if (a.type.startsWith("wb_")) {
      const ms = whiteboard.run(a);
      return silent ? null : timerTask(ms);
    }
    if (silent) return null;
    switch (a.type) {
      case "speech": {
        const teacher = teacherOf(state.ctx.agents);
        speaker.speak(teacher, a.text);
        const wait = () => timerTask(readingTime(a.text, settings.speed));
        const task = a.audioId ? mediaTask(new Audio(assetUrl(a.audioId)), { speed: settings.speed, fallback: wait })
          : wait();
        task.done.then(() => speaker.idle());
        return task;
      }
      case "spotlight":
        effects.spotlight(a.elementId, a.dimOpacity);
        return null;
      case "laser":
        effects.laser(a.elementId, a.color);
        return null;
      case "play_video": {
        const video = canvas.content.querySelector(`[data-element-id="${CSS.escape(a.elementId)}"] video`);
        return video ? mediaTask(video, { speed: 1, limitMs: VIDEO_LIMIT_MS }) : null;
      }
      case "discussion": {
        // §8.6: a discussion is offered once, and only when the agent it names is in the roster.
        const named = a.agentId ? state.ctx.agents.find((ag) => ag.id === a.agentId) : null;
        const key = a.id ?? a.topic;
        if (consumed.has(key) || (a.agentId && !named)) return null;
        consumed.add(key);
        const opener = named || state.ctx.agents.find((ag) => ag.role === "student");
        return discussionTask(cards, a, opener, { onJoin: () => state.ctx.onDiscuss?.(a, opener) });
      }
      default:
        if (a.type.startsWith("widget_")) {
          state.frame?.post(a);
          return timerTask(300);
        }
        return null; // an unknown type is skipped
    }
  };

  const onEnd = () => {
    speaker.idle();
    syncControls();
    const scene = state.scene;
    if (!settings.autoplay || scene.type !== "slide") return;
    clearTimeout(state.timer);
    state.timer = setTimeout(() => state.ctx?.onNext({ autoplay: true }), AUTOPLAY_DELAY_MS / settings.speed);
  };

  const buildEngine = (scene) => {
    let actions = actionsOf(scene);
    if (!actions.length && scene.type === "slide") actions = [{ id: "dwell", type: "speech", text: "" }];
    if (!actions.length) return null;
    return new Engine(actions, {
      perform,
      onChange: (e) => {
        syncControls();
        state.ctx?.onPosition?.(e.index);
      },
      onEnd,
      onStart: () => {
        effects.clear();
        whiteboard.reset();
        cards.replaceChildren();
        speaker.speak(teacherOf(state.ctx.agents), "");
        speaker.idle();
      },
    });
  };

  const drawView = (scene) => {
    state.frame?.frame.remove();
    state.frame = null;
    sheet.replaceChildren();
    const ctx = state.ctx;
    const media = ctx.classroom.media || {};
    root.dataset.sceneType = scene.type || "pending";
    host.hidden = false;
    sheet.hidden = true;
    if (scene.pending) {
      canvas.draw(null, { media });
      sheet.hidden = false;
      host.hidden = true;
      sheet.append(h("div", { class: "scene-pending" }, h("span", { class: "spinner", "aria-hidden": "true" }),
        h("p", {}, t("pendingScene"))));
    } else if (scene.type === "slide") {
      canvas.draw(scene.content?.canvas, { media });
      canvas.frame.setAttribute("role", "group"); // not "img": a slide holds controls (video, audio)
      canvas.frame.setAttribute("aria-label", t("canvas", { title: scene.title }));
    } else if (scene.type === "interactive") {
      canvas.draw({ elements: [] }, { media });
      canvas.frame.removeAttribute("role");
      canvas.frame.removeAttribute("aria-label");
      state.frame = interactiveFrame(scene.content, t("interactive", { title: scene.title }));
      canvas.overlays.prepend(state.frame.frame);
    } else {
      host.hidden = true;
      sheet.hidden = false;
      sheet.append(scene.type === "quiz" ? quizView(scene, { onGraded: () => ctx.onGraded?.() })
        : h("p", { class: "scene-pending" }, scene.title));
    }
  };

  const api = {
    get engine() {
      return state.engine;
    },
    canvas, effects, whiteboard, speaker,
    show(scene, ctx, { play = false } = {}) {
      clearTimeout(state.timer);
      state.engine?.stop();
      state.scene = scene;
      state.ctx = ctx;
      state.key = JSON.stringify([scene, ctx.classroom.media]);
      effects.clear();
      const pages = ctx.classroom.stage?.whiteboard;
      whiteboard.setInitial(Array.isArray(pages) && pages.length ? pages[pages.length - 1].elements || [] : []);
      whiteboard.reset();
      cards.replaceChildren();
      speaker.clear();
      drawView(scene);
      state.engine = scene.pending ? null : buildEngine(scene);
      timeline.replaceChildren(...(state.engine?.actions || []).map((a, i) => h("li", { dataset: { type: a.type } },
        h("button", { type: "button", class: "step", title: a.type, onclick: () => state.engine?.seek(i) },
          h("span", { class: "step-type" }, a.type), " ", actionLabel(a)))));
      syncControls();
      if (play) state.engine?.play();
    },
    /** The document changed: redraw the scene shown if its own data (or its media) did, keeping the position. */
    refresh(scene, ctx) {
      const key = JSON.stringify([scene, ctx.classroom.media]);
      if (key === state.key) {
        state.ctx = ctx;
        syncControls();
        return;
      }
      const wasPending = state.scene?.pending;
      if (wasPending || scene.type !== "slide") return api.show(scene, ctx);
      state.key = key;
      state.scene = scene;
      state.ctx = ctx;
      canvas.draw(scene.content?.canvas, { media: ctx.classroom.media || {} });
      syncControls();
    },
    stop() {
      clearTimeout(state.timer);
      state.engine?.stop();
      syncControls();
    },
    setSpeed(v) {
      settings.speed = v;
      speed.value = String(v);
      state.engine?.task?.setSpeed?.(v);
    },
    settings,
  };

  playBtn.addEventListener("click", () => state.engine?.toggle());
  replayBtn.addEventListener("click", () => {
    if (!state.engine) return;
    state.engine.seek(0);
    state.engine.play();
  });
  prevBtn.addEventListener("click", () => state.ctx?.onPrev());
  nextBtn.addEventListener("click", () => state.ctx?.onNext({ autoplay: false }));
  speed.addEventListener("change", () => api.setSpeed(Number(speed.value)));
  autoplay.addEventListener("change", () => {
    settings.autoplay = autoplay.checked;
  });
  return api;
}
