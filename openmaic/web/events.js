// Server-sent events read with fetch: a run's events (`GET /api/generation-runs/{id}/events`) as EventSource
// would deliver them, with the one thing EventSource cannot do — send the access token (identity mode `token`).
//
// It follows the SSE format (`id:`, `event:`, `data:` lines, `:` comments, a blank line ends a frame) and resumes
// the way EventSource does: every (re)connection sends `Last-Event-ID` with the last id seen (the server lets it
// win over `?after`), so each frame arrives once, in order, across drops. A connection that goes silent for
// longer than a few of the server's pings is given up and made again; a 404 means the stream is gone for good.

import { authHeaders } from "./api.js";

const MAX_BACKOFF_MS = 8000;
const SILENCE_MS = 75_000; // three of the server's 25 s pings missed: the connection is dead, not quiet

export class EventStream {
  /**
   * @param {string} path the SSE route, without a query
   * @param {object} options `after` (the seq to start after), `onFrame(type, data)` for every named frame but
   *   `caught_up`, `onCaughtUp(data)` after each connection's backlog, `onConnection(status)` with "connecting",
   *   "live" or "reconnecting", and `onGone()` when the server answers 404 (nothing more will come)
   */
  constructor(path, { after = 0, onFrame, onCaughtUp, onConnection, onGone } = {}) {
    this.path = path;
    this.cursor = String(after);
    this.onFrame = onFrame || (() => {});
    this.onCaughtUp = onCaughtUp || (() => {});
    this.onConnection = onConnection || (() => {});
    this.onGone = onGone || (() => {});
    this.stopped = false;
    this.failures = 0;
    this.controller = null;
    this.timer = null;
    this.watchdog = null;
  }

  start() {
    this._run();
    return this;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.watchdog);
    this.controller?.abort();
  }

  async _run() {
    while (!this.stopped) {
      this.onConnection(this.failures ? "reconnecting" : "connecting");
      try {
        const status = await this._connect();
        if (status === 404) {
          this.stopped = true;
          this.onGone();
          return;
        }
      } catch {
        // a dropped or refused connection: try again below
      }
      if (this.stopped) return;
      this.failures += 1;
      this.onConnection("reconnecting");
      const delay = Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.min(this.failures, 6));
      await new Promise((resolve) => {
        this.timer = setTimeout(resolve, delay);
      });
    }
  }

  /** One connection, read to its end; answers its status when the server refused it. */
  async _connect() {
    const controller = new AbortController();
    this.controller = controller;
    const response = await fetch(`${this.path}?after=${encodeURIComponent(this.cursor)}`, {
      headers: { Accept: "text/event-stream", "Last-Event-ID": this.cursor, ...authHeaders() },
      credentials: "same-origin",
      cache: "no-store",
      signal: controller.signal,
    });
    if (!response.ok || !response.body) return response.status;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const frame = { event: "", data: [] };
    let pending = "";
    this._alive(controller);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return response.status;
        this._alive(controller);
        pending += value;
        // A line ends at \r\n, \n or \r; a \r at the very end may be the first half of a \r\n still to come.
        const lines = pending.split(/\r\n|\n|\r(?!$)/);
        pending = lines.pop();
        for (const line of lines) this._line(line, frame);
      }
    } finally {
      clearTimeout(this.watchdog);
      controller.abort();
    }
  }

  _alive(controller) {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => controller.abort(), SILENCE_MS);
  }

  _line(line, frame) {
    if (line === "") {
      this._dispatch(frame);
      frame.event = "";
      frame.data = [];
      return;
    }
    if (line.startsWith(":")) return; // a comment: the server's ping
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") frame.event = value;
    else if (field === "data") frame.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.cursor = value;
  }

  _dispatch(frame) {
    if (!frame.data.length || this.stopped) return;
    let data;
    try {
      data = JSON.parse(frame.data.join("\n"));
    } catch {
      return; // not one of ours
    }
    const type = frame.event || "message";
    if (type === "caught_up") {
      this.failures = 0;
      this.onConnection("live");
      this.onCaughtUp(data);
    } else {
      this.onFrame(type, data);
    }
  }
}
