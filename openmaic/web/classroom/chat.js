// The chat with the course's agents (OPENMAIC-COURSE-FORMAT §4.5, §8.6): the learner asks at any point (the Ask
// button, or Q), or joins a discussion; the answering agent (the discussion's opener, else the teacher) replies
// through `POST /api/classroom-chat/{stageId}/messages`, streamed as server-sent events and shown as it is written.
// What the learner sees goes with each question (the scene's title, the text of its elements, its speech lines)
// so the reply is grounded in it. The conversation is the learner's own and kept on the server
// (`GET /api/classroom-chat/{stageId}`): a reload or another device shows it again.

import { avatar } from "./agents.js";
import { language, t } from "./i18n.js";
import { actionsOf, authHeaders, h } from "./util.js";

const LIMITS = { lines: 60, line: 4000, agents: 12, persona: 2000, message: 4000 };

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " };

/** Plain text of format HTML, by dropping its tags (never parsed: the page puts no text into HTML). */
function plain(html) {
  if (!html) return "";
  return String(html).replace(/<[^>]*>/g, " ")
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (all, name) => {
      if (name[0] !== "#") return ENTITIES[name.toLowerCase()] ?? all;
      const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
      return code > 0 && code < 0x110000 ? String.fromCodePoint(code) : all;
    })
    .replace(/\s+/g, " ").trim();
}

/** What a scene shows and says, as the question's grounding. */
export function sceneContext(scene) {
  const texts = [];
  const els = scene?.content?.canvas?.elements;
  for (const el of Array.isArray(els) ? els : []) {
    if (!el || typeof el !== "object") continue;
    if (el.type === "text") texts.push(plain(el.content));
    else if (el.type === "shape") texts.push(plain(el.text?.content));
    else if (el.type === "latex") texts.push(String(el.latex || ""));
    else if (el.type === "table") {
      for (const row of Array.isArray(el.data) ? el.data : []) {
        texts.push((Array.isArray(row) ? row : []).map((c) => plain(c?.text)).filter(Boolean).join(" | "));
      }
    } else if (el.type === "code") texts.push((el.lines || []).map((l) => l?.content ?? "").join("\n"));
  }
  for (const q of Array.isArray(scene?.content?.questions) ? scene.content.questions : []) {
    texts.push([q.question, ...(q.options || []).map((o) => `${o.value}. ${o.label}`)].filter(Boolean).join(" "));
  }
  const speech = actionsOf(scene).filter((a) => a.type === "speech" && a.text).map((a) => String(a.text));
  const cut = (list) => list.filter((x) => x && x.trim()).slice(0, LIMITS.lines).map((x) => x.slice(0, LIMITS.line));
  return { id: scene?.id || null, title: String(scene?.title || "").slice(0, 500), texts: cut(texts), speech: cut(speech) };
}

/** The frames of a server-sent event stream read with fetch: `onFrame(event, data)` for each. */
async function readFrames(response, onFrame) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onFrame(event, JSON.parse(data.join("\n")));
    }
  }
}

/**
 * The chat panel of the classroom `stageId`: `panel` to place, `open({topic, agent, say})` to show it (with `say`,
 * the learner's message is sent at once), `close()`. `context()` answers `{scene, sceneIndex, actionIndex,
 * agents, course}` for the moment of asking; `onOpen` and `onClose` hear the panel open (playback pauses) and close.
 */
export function createChat(stageId, { context, onOpen = () => {}, onClose = () => {} }) {
  const list = h("ol", { class: "chat-log", "aria-live": "polite", "aria-relevant": "additions text" });
  const empty = h("p", { class: "chat-empty hint" }, t("chatEmpty"));
  const topicLine = h("p", { class: "chat-topic", hidden: true });
  const input = h("textarea", { id: "chat-input", rows: "2", maxlength: String(LIMITS.message),
    "aria-label": t("yourQuestion") });
  const send = h("button", { type: "submit", class: "button primary" }, t("send"));
  const status = h("p", { class: "chat-status", role: "status" });
  const form = h("form", { class: "chat-form" }, input, send);
  const closeBtn = h("button", { type: "button", class: "button chat-close", "aria-label": t("close") }, "×");
  const heading = h("h2", { id: "chat-heading", class: "chat-heading", tabindex: "-1" }, t("chatTitle"));
  const panel = h("aside", { class: "chat-panel", "aria-labelledby": "chat-heading", hidden: true,
    dataset: { state: "closed" } },
  h("div", { class: "chat-head" }, heading, closeBtn), topicLine, empty, list, status, form);
  const state = { loaded: null, busy: false, topic: null, agentId: null, waits: 0 };

  const agentOf = (id, name) => context().agents.find((a) => a.id === id) || { id, name: name || "?", color: "#3b82f6" };

  function item(m) {
    const mine = m.role === "user";
    const who = mine ? null : agentOf(m.agentId, m.agentName);
    const text = h("p", { class: "chat-text" }, m.content || "");
    // The agent's colour marks its messages (avatar and edge); names stay in the text colour, which always reads.
    const li = h("li", { class: "chat-message", dataset: { role: m.role, id: m.id || "", agentId: who?.id || "",
      state: m.interrupted ? "interrupted" : "done" } },
    h("div", { class: "chat-who" }, who ? avatar(who, "sm") : null,
      h("span", { class: "chat-name" }, mine ? t("you") : who.name)),
    text, m.interrupted ? h("p", { class: "hint" }, t("interrupted")) : null);
    if (who) li.style.setProperty("--agent", who.color || "#3b82f6");
    return { li, text };
  }

  function show(m) {
    empty.hidden = true;
    const node = item(m);
    list.append(node.li);
    node.li.scrollIntoView?.({ block: "nearest" });
    return node;
  }

  async function load() {
    state.loaded ??= (async () => {
      try {
        const r = await fetch(`/api/classroom-chat/${encodeURIComponent(stageId)}`, {
          headers: { Accept: "application/json", ...authHeaders() }, credentials: "same-origin" });
        if (!r.ok) throw new Error(`${r.status}`);
        const conversation = await r.json();
        const kept = conversation.messages || [];
        list.replaceChildren();
        kept.forEach(show);
        empty.hidden = kept.length > 0;
        panel.dataset.loaded = "true";
        if (conversation.pendingQuestion) answerPending();
      } catch (err) {
        status.textContent = t("chatFailed", { message: err.message });
        state.loaded = null;
      }
    })();
    return state.loaded;
  }

  /** The request body: the moment's context (scene, agents, course, language) and who answers. */
  function replyContext() {
    const ctx = context();
    const body = {
      scene: sceneContext(ctx.scene), course: (ctx.course || "").slice(0, 300),
      agents: ctx.agents.slice(0, LIMITS.agents).map((a) => ({ id: String(a.id).slice(0, 200),
        name: String(a.name || a.id).slice(0, 100), role: String(a.role || "").slice(0, 40),
        persona: String(a.persona || "").slice(0, LIMITS.persona) })),
      language: language(),
    };
    if (Number.isInteger(ctx.actionIndex)) body.actionIndex = ctx.actionIndex;
    if (state.agentId && body.agents.some((a) => a.id === state.agentId)) body.agentId = state.agentId;
    if (state.topic) body.topic = state.topic.slice(0, 2000);
    return body;
  }

  /** Shows a reply's frames as they come (agent, delta…, done); answers the reply's node, done or not. */
  async function showReply(r, pending) {
    let reply = null;
    try {
      await readFrames(r, (event, data) => {
        if (event === "message" && pending) {
          pending.li.dataset.state = "done";
          pending.li.dataset.id = data.id;
        } else if (event === "agent") {
          reply = show({ role: "assistant", agentId: data.agentId, agentName: data.agentName, content: "" });
          reply.li.dataset.state = "streaming";
          reply.li.setAttribute("aria-busy", "true");
        } else if (event === "delta" && reply) {
          reply.text.textContent += data.text;
        } else if (event === "reset" && reply) {
          reply.text.textContent = "";
        } else if (event === "done" && reply) {
          reply.text.textContent = data.content;
          reply.li.dataset.state = "done";
          reply.li.dataset.id = data.id;
          reply.li.removeAttribute("aria-busy");
        } else if (event === "error") {
          throw new Error(data.message);
        }
      });
      if (reply?.li.dataset.state !== "done") throw new Error(t("cutOff"));
    } catch (err) {
      if (reply) {
        reply.li.dataset.state = "error";
        reply.li.removeAttribute("aria-busy");
      }
      throw err;
    }
  }

  // A question whose reply was lost (the server stopped while writing it) is answered when the conversation is
  // shown: the server writes it once however many devices ask, and tells the others how long to wait.
  async function answerPending() {
    if (state.busy) return;
    state.busy = true;
    send.disabled = true;
    if (!panel.hidden) panel.dataset.state = "asking";
    let retry = 0;
    try {
      const r = await fetch(`/api/classroom-chat/${encodeURIComponent(stageId)}/pending`, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...authHeaders() },
        body: JSON.stringify(replyContext()),
      });
      if (r.status === 409) {
        const err = await r.json().catch(() => ({}));
        retry = Math.min(30, Math.max(1, Number(err.error?.details?.retryAfter) || 5));
      } else if (r.status === 200) {
        await showReply(r, null);
      } else if (r.status !== 204) {
        const err = await r.json().catch(() => ({}));
        throw new Error(err.error?.message || `${r.status}`);
      }
    } catch (err) {
      status.textContent = t("chatFailed", { message: err.message });
    } finally {
      state.busy = false;
      send.disabled = false;
      panel.dataset.state = panel.hidden ? "closed" : "open";
    }
    state.waits = retry ? state.waits + 1 : 0;
    if (retry && state.waits <= 20) {
      // Another writer holds the reply: look again once it has written it or its claim has lapsed.
      setTimeout(() => {
        state.loaded = null;
        load();
      }, retry * 1000);
    }
  }

  async function ask(message) {
    if (state.busy || !message.trim()) return;
    state.busy = true;
    send.disabled = true;
    panel.dataset.state = "asking";
    status.textContent = "";
    const body = { message: message.slice(0, LIMITS.message), ...replyContext() };
    const pending = show({ role: "user", content: message });
    pending.li.dataset.state = "sending";
    try {
      const r = await fetch(`/api/classroom-chat/${encodeURIComponent(stageId)}/messages`, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...authHeaders() },
        body: JSON.stringify(body),
      });
      if (!r.ok) {
        const err = await r.json().catch(() => ({}));
        throw new Error(err.error?.message || `${r.status}`);
      }
      await showReply(r, pending);
      input.value = "";
    } catch (err) {
      if (pending.li.dataset.state === "sending") pending.li.dataset.state = "failed";
      status.textContent = t("chatFailed", { message: err.message });
    } finally {
      state.busy = false;
      send.disabled = false;
      panel.dataset.state = "open";
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    ask(input.value);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      ask(input.value);
    }
  });

  const api = {
    panel,
    get isOpen() {
      return !panel.hidden;
    },
    async open({ topic = null, agent = null, say = null } = {}) {
      const wasOpen = !panel.hidden;
      panel.hidden = false;
      panel.dataset.state = state.busy ? "asking" : "open";
      state.topic = topic;
      state.agentId = agent?.id || null;
      topicLine.hidden = !topic;
      topicLine.textContent = topic ? `${t("discussion")}: ${topic}` : "";
      if (!wasOpen) onOpen();
      await load();
      if (say) await ask(say);
      else input.focus();
    },
    close() {
      panel.hidden = true;
      panel.dataset.state = "closed";
      state.topic = null;
      state.agentId = null;
      onClose();
    },
  };
  closeBtn.addEventListener("click", () => api.close());
  return api;
}
