// The classroom's agents (OPENMAIC-COURSE-FORMAT §2.1, §8.6): the roster, and the speaker panel showing who
// speaks — avatar (an initial in the agent's colour when the picture does not load), name, colour, a speaking
// indicator — and the line being said, as a caption. Lecture speech is always the teacher's.

import { t } from "./i18n.js";
import { h } from "./util.js";

/** OpenMAIC's built-in agents, for courses that name them by id (`stage.agentIds`). */
export const PRESET_AGENTS = {
  "default-1": { id: "default-1", name: "AI teacher", role: "teacher", avatar: "/avatars/teacher.png", color: "#3b82f6" },
  "default-2": { id: "default-2", name: "AI助教", role: "assistant", avatar: "/avatars/assist.png", color: "#10b981" },
  "default-3": { id: "default-3", name: "显眼包", role: "student", avatar: "/avatars/clown.png", color: "#f59e0b" },
  "default-4": { id: "default-4", name: "好奇宝宝", role: "student", avatar: "/avatars/curious.png", color: "#ec4899" },
  "default-5": { id: "default-5", name: "笔记员", role: "student", avatar: "/avatars/note-taker.png", color: "#06b6d4" },
  "default-6": { id: "default-6", name: "思考者", role: "student", avatar: "/avatars/thinker.png", color: "#8b5cf6" },
};

/** The roster: a non-empty `generatedAgentConfigs`, else the known `agentIds`; always with a teacher first. */
export function roster(stage) {
  let agents = stage?.generatedAgentConfigs?.length ? stage.generatedAgentConfigs
    : (stage?.agentIds || []).map((id) => PRESET_AGENTS[id]).filter(Boolean);
  if (!agents.some((a) => a.role === "teacher")) agents = [PRESET_AGENTS["default-1"], ...agents];
  return agents;
}

export const teacherOf = (agents) => agents.find((a) => a.role === "teacher") || agents[0];

/** An agent's avatar: its picture, or its initial on its colour when the picture does not load. */
export function avatar(agent, size = "md") {
  const initial = h("span", { class: "initial", "aria-hidden": "true" }, [...(agent.name || "?")][0].toUpperCase());
  const node = h("span", { class: `avatar ${size}`, style: { "--agent": agent.color || "#3b82f6" } }, initial);
  node.style.setProperty("--agent", agent.color || "#3b82f6");
  if (agent.avatar) {
    const img = h("img", { src: agent.avatar, alt: "", onerror: () => img.remove(),
      onload: () => node.classList.add("has-picture") });
    node.append(img);
  }
  return node;
}

/** The speaker panel: `speak(agent, text)` shows a line, `idle()` stops the indicator, `clear()` empties it. */
export function createSpeaker() {
  const face = h("span", { class: "speaker-face" });
  const name = h("span", { class: "speaker-name" });
  const indicator = h("span", { class: "speaking", "aria-hidden": "true" }, h("i"), h("i"), h("i"));
  const caption = h("p", { class: "caption", "aria-live": "polite" });
  const panel = h("div", { class: "speaker", dataset: { speaking: "false" } },
    h("div", { class: "speaker-who" }, face, name, indicator), caption);
  let current = null;
  return {
    panel,
    speak(agent, text) {
      if (current !== agent?.id) {
        face.replaceChildren(avatar(agent));
        name.textContent = agent?.name || "";
        name.style.color = agent?.color || "";
        current = agent?.id;
      }
      panel.dataset.agentId = agent?.id || "";
      panel.dataset.speaking = "true";
      indicator.title = t("speaking");
      caption.textContent = text || "";
    },
    idle() {
      panel.dataset.speaking = "false";
    },
    clear() {
      panel.dataset.speaking = "false";
      caption.textContent = "";
    },
  };
}
