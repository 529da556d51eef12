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
 * Follows one stream over `WS /api/streams/{id}/ws?after=N`.
 *
 * Every event is handed to `onEvent` exactly once, in seq order: after a dropped connection (or a close with
 * 1013, "too slow") it reconnects with `after=<last seq>`, and anything at or below that seq is skipped.
 * Commands (`send`) are answered by the server's ack or error frame; one not answered before a drop is sent
 * again on the next connection with the same command_id, which the server deduplicates.
 */
export class StreamSocket {
  constructor(streamId, { onEvent, onCaughtUp, onConnection } = {}) {
    this.streamId = streamId;
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
    const message = { ...command, command_id: command.command_id || commandId() };
    return new Promise((resolve, reject) => {
      this.pending.set(message.command_id, { message, resolve, reject });
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
    if (this.failures >= 3) {
      // A socket refused at the handshake says nothing about why: ask over HTTP whether the stream is gone.
      try {
        await api("GET", `/api/streams/${encodeURIComponent(this.streamId)}/events?after=${this.seq}&limit=1`);
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
        const p = this.pending.get(frame.command_id);
        this.pending.delete(frame.command_id);
        p?.resolve(frame);
        return;
      }
      case "error": {
        const p = this.pending.get(frame.command_id);
        this.pending.delete(frame.command_id);
        const err = new Error(frame.error?.message || "the server refused the command");
        err.code = frame.error?.code;
        err.details = frame.error?.details || {};
        p?.reject(err);
        return;
      }
    }
  }
}

/**
 * The owner's course cards, live over `WS /api/library/ws`: a `cards` frame, then `card` / `removed` frames.
 * Each (re)connection starts with the full list, so nothing is missed across drops.
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
      const lib = await api("GET", "/api/library");
      this._replace(lib.cards);
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
    const ws = openSocket("/api/library/ws");
    this.ws = ws;
    ws.onmessage = (msg) => {
      this.failures = 0;
      this.onConnection("live");
      const frame = JSON.parse(msg.data);
      if (frame.type === "cards") this._replace(frame.cards);
      else if (frame.type === "card") {
        this.cards.set(frame.card.course_id, frame.card);
        this._changed();
      } else if (frame.type === "removed") this.remove(frame.course_id);
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
    this.cards = new Map(cards.map((c) => [c.course_id, c]));
    this._changed();
  }

  _changed() {
    const sorted = [...this.cards.values()].sort(
      (a, b) => (b.updated_at || "").localeCompare(a.updated_at || "") || a.course_id.localeCompare(b.course_id),
    );
    this.onCards(sorted);
  }
}
