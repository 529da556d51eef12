// What an agent's tool call did, in the teacher's words ("Added the scene 'Evaporation'"): no tool names, no ids,
// no JSON. Scene ids become the titles the course has (or had) for them.

import { h } from "./api.js";
import { t } from "./i18n.js";

// [while running, once done] per tool; {title} is the scene's (or the course's new) title.
const WORDS = {
  read_course: ["Reading the course", "Read the course"],
  read_outline: ["Reading the outline", "Read the outline"],
  read_scene: ["Reading the scene “{title}”", "Read the scene “{title}”"],
  add_scene: ["Adding the scene “{title}”", "Added the scene “{title}”"],
  update_scene: ["Changing the scene “{title}”", "Changed the scene “{title}”"],
  set_element: ["Changing the slide “{title}”", "Changed the slide “{title}”"],
  delete_element: ["Removing part of the slide “{title}”", "Removed part of the slide “{title}”"],
  set_question: ["Changing a question in “{title}”", "Changed a question in “{title}”"],
  delete_question: ["Removing a question from “{title}”", "Removed a question from “{title}”"],
  set_actions: ["Rewriting the script of “{title}”", "Rewrote the script of “{title}”"],
  delete_scene: ["Removing the scene “{title}”", "Removed the scene “{title}”"],
  reorder_scenes: ["Reordering the scenes", "Reordered the scenes"],
  retitle_course: ["Renaming the course to “{title}”", "Renamed the course to “{title}”"],
  generate_scene: ["Writing the scene “{title}”", "Wrote the scene “{title}”"],
  ask_user: ["Asking you a question", "Asked you a question"],
};

const HIDDEN = /(^|_)ids?$|Id$|^position$/;
const ARG_NAMES = { title: "Title", goal: "Goal", kind: "Type", key_points: "Key points", ops: "Changes", question: "Question", element: "Element", actions: "Script" };

/** The title a call is about: its own (a new scene, a new course title) or the scene's it names. */
function subject(item, titles) {
  const a = item.arguments || {};
  if (a.title) return a.title;
  if (a.scene_id) return titles.get(a.scene_id) || t("a scene");
  return "";
}

export function toolSentence(item, titles) {
  const words = WORDS[item.name] || [item.name, item.name];
  const done = item.state === "ok";
  return t(done ? words[1] : words[0], { title: subject(item, titles) });
}

/** Why a call did not happen, said plainly. */
export function toolProblem(item) {
  const e = item.error || "";
  if (item.state === "interrupted" || /^stopped because you cancelled|^interrupted/.test(e)) {
    return /cancel/.test(e) || item.cancelled ? t("Stopped because you cancelled. Nothing was changed.")
      : t("Interrupted: the server stopped before this finished. Nothing was changed.");
  }
  return e ? t("Not done: {reason}", { reason: e }) : "";
}

function valueText(v) {
  if (Array.isArray(v)) return v.map(valueText).join(" · ");
  if (v && typeof v === "object") {
    if (v.op) return `${v.op.replace(/_/g, " ")}: ${valueText(v.value)}`;
    if (v.question) return v.question;
    if (v.content) return String(v.content).replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").trim();
    if (v.text) return v.text;
    return Object.entries(v).filter(([k]) => !HIDDEN.test(k)).map(([k, x]) => `${k}: ${valueText(x)}`).join(", ");
  }
  return String(v);
}

/** What the call was given, without ids, as a short list (or null when there is nothing worth showing). */
export function toolDetails(item) {
  const rows = Object.entries(item.arguments || {})
    .filter(([k, v]) => !HIDDEN.test(k) && v !== null && v !== undefined && v !== "" && !(Array.isArray(v) && !v.length))
    .map(([k, v]) => h("li", {}, h("strong", {}, `${t(ARG_NAMES[k] || k.replace(/_/g, " "))}: `), valueText(v)));
  return rows.length ? h("details", {}, h("summary", {}, t("Details")), h("ul", { class: "tool-details" }, rows)) : null;
}
