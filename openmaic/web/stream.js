// Live connections: a stream's events over its WebSocket (resuming from the last seq), and the library feed.

import { api, commandId, openSocket } from "./api.js";

const MAX_BACKOFF_MS = 8000;

/** Close a socket we no longer need; one still connecting is closed once open (closing it earlier is an error). */
function closeSocket(ws) {
  if (!ws) return;
  ws.onmessage = null;
  if (ws.readyState === WebSocket.CONNECTING) ws.onopen = () => ws.close(1000, "leaving");
  else ws.close(1000, "leaving");
}

/**
 * Follows one stream over `WS /api/streams/{id}/ws?after=N`: its client events (a run's, a session's, a
 * classroom's), the same ones its SSE carries.
 *
 * Every event is handed to `onEvent` exactly once, in seq order: after a dropped connection (or a close with
 * 1013, "too slow") it reconnects with `after=<last seq>`, and anything at or below that seq is skipped.
 * Commands (`send`, with the body of the command's HTTP route) are answered by the server's ack (its `result`
 * is the route's answer) or error frame; one not answered before a drop is sent again on the next connection
 * with the same commandId, which the server deduplicates where the command has one.
 */
export class StreamSocket {
  constructor(streamId, { onEvent, onCaughtUp, onConnection, probe } = {}) {
    this.streamId = streamId;
    this.probe = probe || null; // an HTTP path that answers 404 once the stream is gone
    this.seq = 0;
    this.live = false;
    this.onEvent = onEvent || (() => {});
    this.onCaughtUp = onCaughtUp || (() => {});
    this.onConnection = onConnection || (() => {});
    this.pending = new Map(); // command_id -> {message, resolve, reject}
    this.ws = null;
    this.stopped = false;
    this.failures = 0;
    this.timer = null;
    this._online = () => this._reconnectNow();
    window.addEventListener("online", this._online);
  }

  start() {
    this._connect();
    return this;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    window.removeEventListener("online", this._online);
    closeSocket(this.ws);
    for (const p of this.pending.values()) p.reject(new Error("the page moved on before the server answered"));
    this.pending.clear();
  }

  /** Send a command (`{type, …}`); resolves with the ack frame, rejects with the error the server gave. */
  send(command) {
    const message = { ...command, commandId: command.commandId || commandId() };
    return new Promise((resolve, reject) => {
      this.pending.set(message.commandId, { message, resolve, reject });
      if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message));
    });
  }

  _connect() {
    if (this.stopped) return;
    this.live = false;
    this.onConnection(this.failures ? "reconnecting" : "connecting");
    const ws = openSocket(`/api/streams/${encodeURIComponent(this.streamId)}/ws?after=${this.seq}`);
    this.ws = ws;
    ws.onopen = () => {
      for (const p of this.pending.values()) ws.send(JSON.stringify(p.message));
    };
    ws.onmessage = (msg) => this._frame(JSON.parse(msg.data));
    ws.onclose = (ev) => {
      if (this.ws !== ws || this.stopped) return;
      this.ws = null;
      this.live = false;
      this.failures += 1;
      this.onConnection("reconnecting");
      // 1013: the server found us too slow and will gladly take us back at once from our last seq.
      const delay = ev.code === 1013 ? 0 : Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.min(this.failures, 6));
      this.timer = setTimeout(() => this._retry(), delay);
    };
  }

  async _retry() {
    if (this.stopped) return;
    if (this.failures >= 3 && this.probe) {
      // A socket refused at the handshake says nothing about why: ask over HTTP whether the stream is gone.
      try {
        await api("GET", this.probe);
      } catch (err) {
        if (err.status === 404) {
          this.stopped = true;
          this.onConnection("gone");
          return;
        }
      }
    }
    this._connect();
  }

  _reconnectNow() {
    if (this.stopped || this.ws) return;
    clearTimeout(this.timer);
    this._connect();
  }

  _frame(frame) {
    switch (frame.type) {
      case "event":
        this.failures = 0;
        if (frame.seq <= this.seq) return; // already folded (a resumed connection may overlap)
        this.seq = frame.seq;
        this.onEvent(frame.event);
        return;
      case "caught_up":
        this.failures = 0;
        this.live = true;
        this.onConnection("live");
        this.onCaughtUp(frame.seq);
        return;
      case "ack": {
        const p = this.pending.get(frame.commandId);
        this.pending.delete(frame.commandId);
        p?.resolve(frame);
        return;
      }
      case "error": {
        const p = this.pending.get(frame.commandId);
        this.pending.delete(frame.commandId);
        const err = new Error(frame.error || "the server refused the command");
        err.code = frame.errorCode;
        err.details = frame.details || {};
        p?.reject(err);
        return;
      }
    }
  }
}

/**
 * The owner's classrooms, live over `WS /api/classrooms/ws`: a `classrooms` frame, then `classroom` / `removed`
 * frames. Each (re)connection starts with the full list, so nothing is missed across drops.
 */
export class LibraryFeed {
  constructor({ onCards, onConnection } = {}) {
    this.cards = new Map();
    this.onCards = onCards || (() => {});
    this.onConnection = onConnection || (() => {});
    this.stopped = false;
    this.failures = 0;
    this.ws = null;
    this.timer = null;
  }

  async start() {
    // An HTTP call first: it shows the cards at once and, for anonymous owners, sets the owner cookie.
    try {
      const lib = await api("GET", "/api/classrooms");
      this._replace(lib.classrooms);
    } catch (err) {
      this.onConnection("error", err);
    }
    this._connect();
    return this;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    closeSocket(this.ws);
  }

  remove(courseId) {
    if (this.cards.delete(courseId)) this._changed();
  }

  _connect() {
    if (this.stopped) return;
    const ws = openSocket("/api/classrooms/ws");
    this.ws = ws;
    ws.onmessage = (msg) => {
      this.failures = 0;
      this.onConnection("live");
      const frame = JSON.parse(msg.data);
      if (frame.type === "classrooms") this._replace(frame.classrooms);
      else if (frame.type === "classroom") {
        this.cards.set(frame.classroom.id, frame.classroom);
        this._changed();
      } else if (frame.type === "removed") this.remove(frame.id);
    };
    ws.onclose = () => {
      if (this.ws !== ws || this.stopped) return;
      this.ws = null;
      this.failures += 1;
      this.onConnection("reconnecting");
      this.timer = setTimeout(() => this._connect(), Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.min(this.failures, 6)));
    };
  }

  _replace(cards) {
    this.cards = new Map(cards.map((c) => [c.id, c]));
    this._changed();
  }

  _changed() {
    const sorted = [...this.cards.values()].sort(
      (a, b) => (b.updatedAt || "").localeCompare(a.updatedAt || "") || a.id.localeCompare(b.id),
    );
    this.onCards(sorted);
  }
}
