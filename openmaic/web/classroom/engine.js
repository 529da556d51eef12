// The playback engine (OPENMAIC-COURSE-FORMAT §8.4): one per scene, running the scene's actions in order.
// Every action becomes a task the engine waits for (speech: its narration's end, or a reading-time estimate;
// spotlight/laser: nothing; play_video: the video's end; wb_*: the board's animation; discussion: the learner's
// choice; widget_*: 300 ms). Pausing freezes the running task (audio, video or timer keep their place) and
// resuming continues it. The position is published before each action runs, so a replay or a seek starts at
// the action that was interrupted.

import { cjkShare } from "./util.js";

/** The wait for a speech with no narration (§4.4): CJK 150 ms/char, else 240 ms/word; at least 2 s; ÷ speed. */
export function readingTime(text, speed = 1) {
  const clean = (text || "").trim();
  const ms = cjkShare(clean) > 0.3 ? [...clean.replace(/\s/g, "")].length * 150
    : clean.split(/\s+/).filter(Boolean).length * 240;
  return Math.max(2000, ms) / (speed || 1);
}

/** A task that ends after `ms`, pausable (it keeps the time left). */
export function timerTask(ms) {
  let resolve;
  const done = new Promise((r) => {
    resolve = r;
  });
  let left = ms;
  let started = 0;
  let timer = null;
  const run = () => {
    started = performance.now();
    timer = setTimeout(() => resolve(true), left);
  };
  run();
  return {
    done,
    pause() {
      clearTimeout(timer);
      left = Math.max(0, left - (performance.now() - started));
    },
    resume: run,
    cancel() {
      clearTimeout(timer);
      resolve(false);
    },
  };
}

/** A task that ends when a media element (audio or video) ends; `fallback()` answers a task when it cannot play. */
export function mediaTask(media, { speed = 1, fallback, limitMs = 0 } = {}) {
  let resolve;
  let inner = null; // the fallback task, once the media failed
  let paused = false;
  const done = new Promise((r) => {
    resolve = r;
  });
  const fail = () => {
    if (inner) return;
    inner = fallback ? fallback() : timerTask(0);
    if (paused) inner.pause();
    inner.done.then(resolve);
  };
  media.addEventListener("ended", () => resolve(true), { once: true });
  media.addEventListener("error", fail, { once: true });
  media.playbackRate = speed;
  const play = () => media.play().catch((e) => (e?.name === "AbortError" ? null : fail()));
  play();
  const limit = limitMs ? timerTask(limitMs) : null;
  limit?.done.then((ok) => ok && resolve(true));
  return {
    done,
    media,
    pause() {
      paused = true;
      limit?.pause();
      if (inner) inner.pause();
      else media.pause();
    },
    resume() {
      paused = false;
      limit?.resume();
      if (inner) inner.resume();
      else play();
    },
    cancel() {
      limit?.cancel();
      inner?.cancel();
      media.pause();
      resolve(false);
    },
    setSpeed(v) {
      media.playbackRate = v;
    },
  };
}

export const MODES = ["idle", "playing", "paused", "live"];

/**
 * The engine of one scene. `perform(action, index, {silent})` answers a task (`{done, pause, resume, cancel}`) or
 * null for an instant action; `onChange(engine)` hears every change of mode or position; `onEnd(engine)` the
 * end of the script.
 */
export class Engine {
  constructor(actions, { perform, onChange = () => {}, onEnd = () => {}, onStart = () => {} }) {
    this.actions = actions;
    this.perform = perform;
    this.onChange = onChange;
    this.onEnd = onEnd;
    this.onStart = onStart;
    this.index = 0;
    this.mode = "idle";
    this.task = null;
    this.generation = 0;
    this.finished = false;
  }

  setMode(mode) {
    this.mode = mode;
    this.onChange(this);
  }

  play() {
    if (this.mode === "playing") return;
    if (this.mode === "paused" && this.task) {
      this.task.resume();
      this.setMode("playing");
      return;
    }
    if (this.finished || this.index >= this.actions.length) this.seek(0);
    this.setMode("playing");
    this.loop(++this.generation);
  }

  pause() {
    if (this.mode !== "playing") return;
    this.task?.pause();
    this.setMode("paused");
  }

  toggle() {
    if (this.mode === "playing") this.pause();
    else this.play();
  }

  /** Stop where it is (the scene is left). */
  stop() {
    this.generation++;
    this.task?.cancel();
    this.task = null;
    this.mode = "idle";
  }

  /** Go to action `index` (replaying instant state silently, e.g. the whiteboard), keeping play or pause. */
  seek(index) {
    const wasPlaying = this.mode === "playing";
    this.stop();
    this.finished = false;
    this.onStart(this);
    for (let i = 0; i < index; i++) {
      try {
        this.perform(this.actions[i], i, { silent: true })?.cancel?.();
      } catch {
        // skipped while playing too
      }
    }
    this.index = Math.max(0, Math.min(index, this.actions.length));
    this.setMode("idle");
    if (wasPlaying) this.play();
  }

  async loop(generation) {
    if (this.index === 0) this.onStart(this);
    while (this.index < this.actions.length) {
      if (generation !== this.generation) return;
      const i = this.index;
      this.onChange(this); // the position, before the action runs
      let task = null;
      try {
        task = this.perform(this.actions[i], i, { silent: false });
      } catch (err) {
        // A malformed action (model-written documents) is skipped like an unknown one; the script goes on.
        console.warn("action skipped", this.actions[i]?.type, err);
      }
      if (task) {
        this.task = task;
        if (this.mode === "paused") task.pause();
        const ok = await task.done;
        if (generation !== this.generation || !ok) return;
        this.task = null;
      }
      this.index = i + 1;
    }
    if (generation !== this.generation) return;
    this.finished = true;
    this.setMode("idle");
    this.onEnd(this);
  }
}
