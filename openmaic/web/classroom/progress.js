// The learner's progress kept on the server as learner runtime records (OPENMAIC-COURSE-FORMAT §9.2, the routes
// under /api/persistence/runtime, filed under this learner's key): so a reload, or another device of the same
// learner, resumes where they stopped with their answers shown.
//
// * Where they are: a `playback` session on the course; each move (a scene shown, an action started, the
//   completion page) is a record `{payloadVersion: 1, sceneId, sceneIndex, actionIndex, complete?}` anchored at
//   the scene and action. The last record is the place to resume.
// * Their quiz answers: one `quizAttempt` session per attempt at a quiz scene (a retry starts a new one, as
//   OpenMAIC's quiz view does), whose records are OpenMAIC's `{payloadVersion: 1, phase: draft|submitted|reviewed,
//   answers, results?}` anchored at the scene, plus the attempt's `score` and `total` once reviewed. The newest
//   attempt of a scene is the one shown.
//
// Writes go one at a time per session, in order; a newer place replaces one not yet sent. Nothing here stops
// the classroom: when the server is away (or the page is the offline export) progress is simply not kept.

import { authHeaders } from "./util.js";

const BASE = "/api/persistence/runtime";
/** Dispatched on `document` once a place is kept (`detail`: the place). */
export const KEPT = "openmaic:place-kept";
const POSITION_DELAY_MS = 250;
const state = { on: false, stageId: null, learnerKey: null, playback: null, attempts: new Map(), queues: new Map() };

const json = (method, body) => ({
  method, credentials: "same-origin",
  headers: { Accept: "application/json", ...(body ? { "Content-Type": "application/json" } : {}), ...authHeaders() },
  body: body ? JSON.stringify(body) : undefined,
});

async function call(path, method = "GET", body = null) {
  const r = await fetch(path, json(method, body));
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status}`);
  return r.status === 204 ? null : r.json();
}

const newId = (prefix) => `${prefix}-${globalThis.crypto?.randomUUID?.() || `${Date.now()}-${Math.random().toString(36).slice(2)}`}`;
const now = () => new Date().toISOString();

/** Run `job` after the session's earlier writes (each write waits for the one before it). */
function queued(sessionId, job) {
  const before = state.queues.get(sessionId) || Promise.resolve();
  const next = before.then(job).catch((err) => console.warn("progress not kept:", err.message));
  state.queues.set(sessionId, next);
  return next;
}

async function ensureSession(holder, kind) {
  if (holder.created) return;
  const t = now();
  await call(`${BASE}/sessions`, "POST", { id: holder.id, kind, stageId: state.stageId, learnerKey: state.learnerKey,
    status: "active", createdAt: t, updatedAt: t });
  holder.created = true;
}

async function records(sessionId) {
  return call(`${BASE}/sessions/${encodeURIComponent(sessionId)}/records`);
}

/**
 * Read what this learner kept on the course `stageId`: `{position: {sceneId, sceneIndex, actionIndex, complete} |
 * null, attempts: Map(sceneId -> {phase, answers, results, score, total})}`. Later writes go to the same sessions.
 */
export async function loadProgress(stageId) {
  state.stageId = stageId;
  const found = { position: null, attempts: new Map() };
  try {
    state.learnerKey = (await call("/api/persistence/learner-key")).learnerKey;
    const sessions = await call(`${BASE}/stages/${encodeURIComponent(stageId)}/learners/${encodeURIComponent(state.learnerKey)}/sessions`);
    const playback = sessions.filter((s) => s.kind === "playback" && s.status === "active").pop();
    state.playback = playback ? { id: playback.id, created: true, pending: null, sent: null, timer: null }
      : { id: newId("playback"), created: false, pending: null, sent: null, timer: null };
    const quizzes = sessions.filter((s) => s.kind === "quizAttempt");
    const [moves, ...attempts] = await Promise.all([playback ? records(playback.id) : [],
      ...quizzes.map((s) => records(s.id))]);
    const last = moves.filter((r) => r.payload && typeof r.payload === "object").pop();
    if (last) found.position = { ...last.payload };
    quizzes.forEach((s, i) => {
      const kept = attempts[i].filter((r) => r.payload && typeof r.payload === "object" && r.sceneId).pop();
      if (!kept) return;
      // Sessions come oldest first: the newest attempt of a scene wins.
      const attempt = { id: s.id, created: true, ...kept.payload };
      found.attempts.set(kept.sceneId, attempt);
      state.attempts.set(kept.sceneId, { id: s.id, created: true, closed: s.status !== "active" });
    });
    state.on = true; // only now: a place written before the kept one was read would overwrite it
  } catch (err) {
    state.on = false;
    console.warn("progress could not be read:", err.message);
  }
  return found;
}

/** Keep the learner's place. Places are written a moment later (POSITION_DELAY_MS), off the playback's own path
 * (an action starts at once after the one before it), and a burst of moves (instant actions) writes the last. */
export function savePosition(position) {
  const p = state.playback;
  if (!state.on || !p) return;
  const key = JSON.stringify(position);
  if (key === p.sent || key === p.pendingKey) return;
  p.pending = position;
  p.pendingKey = key;
  if (p.timer) return;
  p.timer = setTimeout(() => {
    p.timer = null;
    queued(p.id, async () => {
      const at = p.pending;
      const atKey = p.pendingKey;
      if (!at) return;
      p.pending = null;
      p.pendingKey = null;
      await ensureSession(p, "playback");
      const record = { id: newId("move"), sessionId: p.id, createdAt: now(), sceneId: at.sceneId,
        payload: { payloadVersion: 1, ...at } };
      if (Number.isInteger(at.actionIndex)) record.actionIndex = at.actionIndex;
      await call(`${BASE}/sessions/${encodeURIComponent(p.id)}/records`, "POST", record);
      p.sent = atKey;
      document.dispatchEvent(new CustomEvent(KEPT, { detail: at }));
    });
  }, POSITION_DELAY_MS);
}

/** Keep a phase of the attempt at quiz scene `sceneId` (`draft`, `submitted`, `reviewed`). */
export function saveAttempt(sceneId, payload) {
  if (!state.on) return Promise.resolve();
  let a = state.attempts.get(sceneId);
  if (!a || a.closed) {
    a = { id: newId("quiz"), created: false, closed: false };
    state.attempts.set(sceneId, a);
  }
  const attempt = a;
  return queued(attempt.id, async () => {
    await ensureSession(attempt, "quizAttempt");
    const record = { id: newId("answer"), sessionId: attempt.id, createdAt: now(), sceneId,
      payload: { payloadVersion: 1, ...payload } };
    if (payload.phase === "reviewed") record.sessionTransition = { status: "completed", updatedAt: now() };
    await call(`${BASE}/sessions/${encodeURIComponent(attempt.id)}/records`, "POST", record);
    if (payload.phase === "reviewed") attempt.closed = true; // the next answers start a new attempt
  });
}

/** Start a new attempt at `sceneId` (a retry): the reviewed one stays as it was. */
export function newAttempt(sceneId) {
  const a = state.attempts.get(sceneId);
  if (a) a.closed = true;
}

/** Whether progress is being kept (the server answered when the page loaded). */
export const keeping = () => state.on;
