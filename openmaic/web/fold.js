// What the views show, as pure folds of a stream's events: fold(state, event) -> new state.
// Replaying the same events always gives the same state, so a reloaded page shows what it showed before.

// -- generation runs --------------------------------------------------------------------------------------------

export function initialRun() {
  return {
    seq: 0,
    runId: null,
    courseId: null,
    requirement: "",
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
    scenes: [], // {content, actions} per confirmed outline item
    failedStep: null,
    retryRequested: false,
    stopRequested: false,
    deferredUntil: null,
    ended: null,
  };
}

function setScene(scenes, index, change) {
  if (index < 0 || index >= scenes.length) return scenes;
  const out = scenes.slice();
  out[index] = { ...out[index], ...change };
  return out;
}

export function foldRun(s, e) {
  const d = e.data || {};
  s = { ...s, seq: e.seq };
  switch (e.type) {
    case "run.created":
      return {
        ...s,
        runId: d.run_id || e.stream_id,
        courseId: d.course_id,
        requirement: d.input?.requirement || "",
        outlineReview: d.input?.outline_review || "wait",
      };
    case "run.state_changed":
      if (d.state === "paused") return { ...s, state: d.state, failedStep: d.step || s.step, error: d.error || s.error };
      return { ...s, state: d.state, failedStep: null, error: s.state === "paused" ? null : s.error, retryRequested: false };
    case "run.step_started":
      return { ...s, step: d.step };
    case "run.step_completed":
      return { ...s, error: null };
    case "run.step_failed":
      return { ...s, error: d.error };
    case "run.retry_requested":
      return { ...s, retryRequested: true };
    case "run.stop_requested":
      return { ...s, stopRequested: true };
    case "run.admission_deferred":
      return { ...s, deferredUntil: d.until };
    case "run.admitted":
      return { ...s, deferredUntil: null };
    case "run.outline_restarted":
      return { ...s, streamed: [] };
    case "run.outline_item": {
      const items = d.index === 0 ? [] : s.streamed.slice(0, d.index);
      return { ...s, streamed: [...items, d.item] };
    }
    case "run.outline_proposed":
      return {
        ...s,
        proposed: d.items,
        proposedRevision: d.revision,
        title: d.title || s.title,
        countdownUntil: d.countdown_until || null,
        streamed: [],
      };
    case "run.outline_confirmed": {
      if (s.confirmedRevision) return s;
      const items = d.items && d.items.length ? d.items : s.proposed;
      return {
        ...s,
        confirmed: items,
        confirmedRevision: d.revision,
        confirmedBy: d.by || "user",
        scenes: items.map(() => ({ content: null, actions: null })),
      };
    }
    case "run.scene_content":
      return { ...s, scenes: setScene(s.scenes, d.index, { content: d.content }) };
    case "run.scene_actions":
      return { ...s, scenes: setScene(s.scenes, d.index, { actions: d.actions }) };
    case "session.ended":
      return { ...s, ended: d.status };
    default:
      return s;
  }
}

/** The outline to show: confirmed, else proposed, else what has streamed so far. */
export function runOutline(s) {
  return s.confirmed.length ? s.confirmed : s.proposed.length ? s.proposed : s.streamed;
}

export function scenesCompleted(s) {
  return s.scenes.filter((x) => x.actions).length;
}

/** The index of the scene being written now (or the one a paused run failed on), or -1. */
export function sceneInProgress(s) {
  if (s.state === "paused") {
    const failed = /^scene:(\d+):/.exec(s.failedStep || "");
    return failed ? Number(failed[1]) : -1;
  }
  if (s.state !== "generating") return -1;
  const m = /^scene:(\d+):/.exec(s.step || "");
  return m ? Number(m[1]) : s.scenes.findIndex((x) => !x.actions);
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

export function foldSession(s, e) {
  const d = e.data || {};
  s = { ...s, seq: e.seq };
  switch (e.type) {
    case "session.created":
      return { ...s, courseId: d.input?.course_id || null, status: "idle" };
    case "session.message_posted":
      return {
        ...s,
        status: s.status === "running" ? "running" : "queued",
        items: [...s.items, { kind: "user", seq: e.seq, text: d.text, delivered: false }],
      };
    case "lease.claimed":
      return { ...s, status: "running" };
    case "lease.released":
      return { ...s, status: d.reason === "shutdown" ? "queued" : "idle" };
    case "session.interrupted":
      return { ...s, status: "queued" };
    case "session.cancel_requested":
      return { ...s, cancelRequested: true, status: s.status === "idle" ? "queued" : s.status };
    case "session.ended": {
      const text =
        d.status === "cancelled" ? "Stopped: the agent was cancelled." :
        d.status === "failed" ? `The agent stopped after an error${d.error ? `: ${d.error}` : "."} Send a message to try again.` :
        `The session ended (${d.status}).`;
      const items = s.items.map((x) => (x.kind === "tool" && x.state === "running" ? { ...x, state: "interrupted" } : x));
      return {
        ...s,
        status: d.status,
        error: d.error || null,
        cancelRequested: false,
        draft: "",
        items: [...items, { kind: "notice", seq: e.seq, status: d.status, text }],
      };
    }
    case "model.output_delta":
      return { ...s, draft: s.draft + (d.text || "") };
    case "model.output_reset":
      return { ...s, draft: "" };
    case "model.turn_completed": {
      const delivered = new Set(d.delivered || []);
      let items = s.items.map((x) => (x.kind === "user" && delivered.has(x.seq) ? { ...x, delivered: true } : x));
      if (d.text) items = [...items, { kind: "assistant", seq: e.seq, text: d.text }];
      for (const c of d.tool_calls || []) {
        if (!items.some((x) => x.kind === "tool" && x.callId === c.id)) {
          items = [...items, { kind: "tool", callId: c.id, name: c.name, arguments: c.arguments || {}, state: "planned" }];
        }
      }
      return { ...s, items, draft: "", turns: s.turns + 1, error: null };
    }
    case "tool.called":
      return {
        ...s,
        items: updateTool(s.items, d.call_id, { state: "running" }, { name: d.name, arguments: d.arguments || {} }),
      };
    case "tool.result": {
      const state = d.interrupted ? "interrupted" : d.ok ? "ok" : "error";
      const items = updateTool(s.items, d.call_id, { state, result: d.result, error: d.error || null }, { name: d.name });
      return { ...s, items, editedAt: d.ok ? e.seq : s.editedAt };
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
  idle: "waiting for you",
  cancelled: "cancelled",
  failed: "stopped after an error",
};

export function sessionLabel(s) {
  if (s.cancelRequested && sessionBusy(s)) return "cancelling…";
  return SESSION_LABELS[s.status] || s.status;
}
