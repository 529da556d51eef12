// The discussion card (OPENMAIC-COURSE-FORMAT §4.5, §8.6): after 3 s (so the last sentence can end) the topic is
// shown with the agent who opens it, Join and Skip; in playback it counts down 5 s and then skips by itself.
// Joining opens the chat on the topic, where the agent who opened it answers first (the scene pauses meanwhile).

import { avatar } from "./agents.js";
import { t } from "./i18n.js";
import { h } from "./util.js";
import { timerTask } from "./engine.js";

export const DELAY_MS = 3000;
export const COUNTDOWN_S = 5;

/** A task showing the card in `host` for discussion action `a`, opened by `agent` (may be undefined); `onJoin`
 * hears the learner join (the chat opens on the topic). */
export function discussionTask(host, a, agent, { onJoin = () => {} } = {}) {
  let resolve;
  const done = new Promise((r) => {
    resolve = r;
  });
  let phase = timerTask(DELAY_MS);
  let left = COUNTDOWN_S;
  let card = null;
  const finish = (how) => {
    phase.cancel();
    if (card) {
      card.dataset.choice = how;
      if (how === "joined") {
        card.querySelector(".discussion-actions").replaceChildren(h("p", {}, t("joined")));
        onJoin();
      }
      else card.remove();
    }
    resolve(true);
  };
  const tick = () => {
    const count = card.querySelector(".countdown");
    count.textContent = t("skipIn", { s: left });
    if (left <= 0) return finish("skipped");
    left -= 1;
    phase = timerTask(1000);
    phase.done.then((ok) => ok && tick());
  };
  phase.done.then((ok) => {
    if (!ok) return;
    card = h("div", { class: "discussion-card", role: "dialog", "aria-label": t("discussion"),
      dataset: { actionId: a.id || "" } },
    h("div", { class: "discussion-head" }, agent ? avatar(agent, "sm") : null,
      h("span", { class: "discussion-label" }, agent ? `${agent.name} · ${t("discussion")}` : t("discussion"))),
    h("p", { class: "discussion-topic" }, a.topic || ""),
    a.prompt ? h("p", { class: "discussion-prompt" }, a.prompt) : null,
    h("div", { class: "discussion-actions" },
      h("button", { type: "button", class: "button primary", onclick: () => finish("joined") }, t("join")),
      h("button", { type: "button", class: "button", onclick: () => finish("skipped") }, t("skip")),
      h("span", { class: "countdown", "aria-live": "off" })));
    host.append(card);
    card.querySelector("button").focus({ preventScroll: true });
    tick();
  });
  return {
    done,
    pause: () => phase.pause(),
    resume: () => phase.resume(),
    cancel() {
      phase.cancel();
      card?.remove();
      resolve(false);
    },
  };
}
