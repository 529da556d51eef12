// What the views show, as pure folds of a stream's events: fold(state, event) -> new state.
// Replaying the same events always gives the same state, so a reloaded page shows what it showed before.

// -- generation runs ---------------------------------------------------------------------------------------------
// A run's client events (OpenMAIC's vocabulary: state, step_started, outline_item, outline_ready, scene_ready, …),
// folded on top of its snapshot (GET /api/generation-runs/{id}), which gives what events do not repeat: the
// requirement, the review mode, the countdown.

export function initialRun() {
  return {
    seq: 0,
    runId: null,
    courseId: null,
    requirement: "",
    models: {}, // the model chosen per slot instead of the owner's settings
    outlineReview: "wait",
    state: "preparing",
    step: null,
    error: null,
    title: "",
    streamed: [],
    proposed: [],
    proposedRevision: 0,
    countdownUntil: null,
    confirmed: [],
    confirmedRevision: 0,
    confirmedBy: null,
    confirmedEdited: false,
    scenes: [], // {ready} per confirmed outline item; their content is read from the classroom
    failedStep: null,
    retryRequested: false,
    stopRequested: false,
    ended: null,
  };
}

/** An outline entry: OpenMAIC's SceneOutline kept whole (media requests, quiz settings, widget and all), so that
 * sending it back after an edit changes only what the teacher changed. */
export function outlineItem(o) {
  return structuredClone(o);
}

function setScene(scenes, index, change) {
  if (index < 0 || index >= scenes.length) return scenes;
  const out = scenes.slice();
  out[index] = { ...out[index], ...change };
  return out;
}

/** The run's state from its snapshot (`run`), before any event is folded on top. */
export function runFromSnapshot(run) {
  const s = initialRun();
  const outline = run.outline;
  const items = outline ? outline.outlines.map(outlineItem) : [];
  const confirmed = run.stageId && outline ? items : [];
  return {
    ...s,
    seq: run.seq,
    runId: run.id,
    courseId: run.stageId,
    requirement: run.input?.requirement || "",
    models: run.input?.models || {},
    outlineReview: run.input?.outlineReview || "wait",
    state: run.state,
    step: run.step,
    error: run.error ? run.error.message : null,
    failedStep: run.state === "paused" ? run.error?.step || run.step : null,
    title: outline?.courseTitle || "",
    proposed: outline && !run.stageId ? items : [],
    proposedRevision: outline ? outline.revision : 0,
    countdownUntil: run.outlineAutoConfirmAt || null,
    confirmed,
    confirmedRevision: run.stageId && outline ? outline.revision : 0,
    scenes: confirmed.map((_, i) => ({ ready: i < run.progress.scenesCompleted })),
    ended: run.state === "completed" || run.state === "ended" ? run.state : null,
  };
}

export function foldRun(s, e) {
  const d = e.data || {};
  s = { ...s, seq: e.seq };
  switch (e.type) {
    case "state":
      if (d.state === "paused") return { ...s, state: d.state, step: d.step || s.step, failedStep: d.step || s.step };
      return { ...s, state: d.state, step: d.step || s.step, failedStep: null, error: s.state === "paused" ? null : s.error, retryRequested: false };
    case "step_started":
      return { ...s, step: d.step };
    case "step_completed":
      return { ...s, error: null };
    case "step_failed":
      return { ...s, error: d.message };
    case "outline_reset":
      return { ...s, streamed: [] };
    case "outline_item": {
      const items = d.index === 0 ? [] : s.streamed.slice(0, d.index);
      return { ...s, streamed: [...items, outlineItem(d.outline)] };
    }
    case "outline_ready":
      return {
        ...s,
        proposed: d.outline.outlines.map(outlineItem),
        proposedRevision: d.revision,
        title: d.outline.courseTitle || s.title,
        streamed: [],
      };
    case "outline_confirmed": {
      if (s.confirmedRevision) return s;
      const items = d.outline ? d.outline.outlines.map(outlineItem) : s.proposed;
      return {
        ...s,
        confirmed: items,
        confirmedRevision: d.revision,
        confirmedBy: d.by || "user",
        confirmedEdited: Boolean(d.edited),
        countdownUntil: null,
        scenes: items.map(() => ({ ready: false })),
      };
    }
    case "course_created":
      return { ...s, courseId: d.stageId };
    case "scene_ready":
      return { ...s, scenes: setScene(s.scenes, d.index, { ready: true, id: d.sceneId }) };
    case "completed":
    case "ended":
      return { ...s, ended: e.type };
    default:
      return s;
  }
}

/** The outline to show: confirmed, else proposed, else what has streamed so far. */
export function runOutline(s) {
  return s.confirmed.length ? s.confirmed : s.proposed.length ? s.proposed : s.streamed;
}

export function scenesCompleted(s) {
  return s.scenes.filter((x) => x.ready).length;
}

/** The id of the scene being written now (or the one a paused run failed on), or null. */
export function sceneIdInProgress(s) {
  const i = sceneInProgress(s);
  return i >= 0 ? s.confirmed[i]?.id ?? null : null;
}

/** The index of the scene being written now (or the one a paused run failed on), or -1. */
export function sceneInProgress(s) {
  if (s.state === "paused") {
    const failed = /^scene:(\d+):/.exec(s.failedStep || "");
    return failed ? Number(failed[1]) : -1;
  }
  if (s.state !== "generating") return -1;
  const m = /^scene:(\d+):/.exec(s.step || "");
  return m ? Number(m[1]) : s.scenes.findIndex((x) => !x.ready);
}

const LABELS = {
  preparing: "preparing",
  outlining: "outlining",
  awaiting_outline_confirmation: "waiting for confirmation",
  paused: "paused after a failure",
  completed: "ready",
  ended: "ended",
  stopped: "ended",
};

/** The same words the library cards use ("generating 3/8", "ready", …). */
export function runLabel(s) {
  if (s.state === "generating") return `generating ${scenesCompleted(s)}/${s.scenes.length}`;
  return LABELS[s.state] || s.state;
}

// -- workbench (Pro) sessions -----------------------------------------------------------------------------------

export function initialSession() {
  return {
    seq: 0,
    courseId: null,
    status: "queued",
    error: null,
    cancelRequested: false,
    items: [], // {kind: "user"|"assistant"|"tool"|"notice", …}
    draft: "", // streamed text of the turn in flight (not yet committed)
    turns: 0,
    editedAt: 0, // seq of the last tool result that succeeded (the course may have changed)
  };
}

function updateTool(items, callId, change, fallback) {
  const i = items.findIndex((x) => x.kind === "tool" && x.callId === callId);
  if (i < 0) return [...items, { kind: "tool", callId, state: "running", arguments: {}, ...fallback, ...change }];
  const out = items.slice();
  out[i] = { ...out[i], ...change };
  return out;
}

/** The session's state from its meta (GET /api/agent/sessions/{id}), before any event is folded on top. */
export function sessionFromMeta(meta) {
  return { ...initialSession(), courseId: meta.stageId, status: meta.status };
}

// A session's client events (OpenMAIC's agent runtime vocabulary: session_start, user_message, message_update,
// turn_end, tool_execution_start/_end, user_question, session_end, …).
export function foldSession(s, e) {
  const d = e.data || {};
  s = { ...s, seq: e.id };
  switch (e.type) {
    case "session_start":
      return { ...s, courseId: d.stageId || s.courseId, status: "succeeded" };
    case "user_message":
      return {
        ...s,
        status: s.status === "running" ? "running" : "queued",
        items: [...s.items, { kind: "user", seq: d.seq, text: d.text, delivered: false }],
      };
    case "session_resumed":
      return { ...s, status: "running" };
    case "session_interrupted":
      return { ...s, status: "queued" };
    case "session_end": {
      const status = d.status;
      const items = s.items.map((x) => (x.kind === "tool" && x.state === "running" ? { ...x, state: "interrupted" } : x));
      if (status === "succeeded") return { ...s, status, cancelRequested: false, draft: "", items };
      const text =
        status === "cancelled" ? "Stopped: the agent was cancelled." :
        status === "failed" ? `The agent stopped after an error${d.error ? `: ${d.error}` : "."} Send a message to try again.` :
        `The session ended (${status}).`;
      return {
        ...s,
        status,
        error: d.error || null,
        cancelRequested: false,
        draft: "",
        items: [...items, { kind: "notice", seq: e.id, status, text }],
      };
    }
    case "message_update":
      return { ...s, status: "running", draft: s.draft + (d.delta || "") };
    case "message_reset":
      return { ...s, draft: "" };
    case "turn_end": {
      const delivered = new Set(d.delivered || []);
      let items = s.items.map((x) => (x.kind === "user" && delivered.has(x.seq) ? { ...x, delivered: true } : x));
      if (d.text) items = [...items, { kind: "assistant", seq: e.id, text: d.text }];
      for (const c of d.toolCalls || []) {
        if (!items.some((x) => x.kind === "tool" && x.callId === c.id)) {
          items = [...items, { kind: "tool", callId: c.id, name: c.name, arguments: c.arguments || {}, state: "planned" }];
        }
      }
      return { ...s, status: "running", items, draft: "", turns: s.turns + 1, error: null };
    }
    case "tool_execution_start":
      return {
        ...s,
        items: updateTool(s.items, d.toolCallId, { state: "running" }, { name: d.toolName, arguments: d.args || {} }),
      };
    case "tool_execution_end": {
      const state = d.interrupted ? "interrupted" : d.isError ? "error" : "ok";
      const items = updateTool(s.items, d.toolCallId, { state, result: d.isError ? null : d.result,
        error: d.isError ? d.result : null }, { name: d.toolName });
      return { ...s, items, editedAt: d.isError ? s.editedAt : e.id };
    }
    case "user_question": {
      const items = updateTool(s.items, d.toolCallId, { state: "ok", result: { question: d.question } }, { name: "ask_user" });
      return { ...s, items };
    }
    default:
      return s;
  }
}

/** Whether the agent is working (or about to): Cancel makes sense then. */
export function sessionBusy(s) {
  return s.status === "running" || s.status === "queued";
}

const SESSION_LABELS = {
  queued: "starting…",
  running: "working…",
  succeeded: "waiting for you",
  cancelled: "cancelled",
  failed: "stopped after an error",
};

export function sessionLabel(s) {
  if (s.cancelRequested && sessionBusy(s)) return "cancelling…";
  return SESSION_LABELS[s.status] || s.status;
}
