// The outline review: add, remove and reorder scenes; change each one's type, title, description, key points,
// quiz settings and media requests. The entries are OpenMAIC's SceneOutline objects kept whole: an edit changes the
// field it names and nothing else, so what the form does not show (media ids, widget settings, …) goes back as it
// came. The draft is kept in this tab (sessionStorage) so a reload loses nothing.

import { h } from "./api.js";
import { t } from "./i18n.js";

export const SCENE_TYPES = [["slide", "Slide"], ["quiz", "Quiz"], ["interactive", "Interactive page"]];
const DIFFICULTIES = [["easy", "Easy"], ["medium", "Medium"], ["hard", "Hard"]];
const QUESTION_TYPES = [["single", "Single choice"], ["multiple", "Multiple choice"], ["short_answer", "Short answer"]];
const ASPECTS = ["16:9", "4:3", "1:1", "9:16"];
const DEFAULT_QUIZ = { questionCount: 3, difficulty: "medium", questionTypes: ["single"] };

export function readDraft(key) {
  try {
    return JSON.parse(sessionStorage.getItem(key) || "null");
  } catch {
    return null;
  }
}

function select(id, options, value, onChange) {
  const el = h("select", { id }, options.map(([v, label]) => h("option", { value: v, selected: v === value }, t(label))));
  el.addEventListener("change", () => onChange(el.value));
  return el;
}

let made = 0;
function newId(prefix) {
  made += 1;
  return `${prefix}_${Date.now().toString(36)}${made}`;
}

/** The outline as the server should get it: entries in their new order, each numbered. */
export function outlineToSend(items) {
  return items.map((o, i) => ({ ...o, order: i + 1 }));
}

/**
 * The editor for `proposed` (SceneOutline[]). `draftKey` names its draft in sessionStorage; `onChange()` is called
 * after every edit. Answers `{el, items()}`.
 */
export function outlineEditor(proposed, draftKey, onChange = () => {}) {
  let items = readDraft(draftKey) || structuredClone(proposed);
  const list = h("ol", { class: "outline-edit" });
  const addScene = h("button", { type: "button", class: "button" }, t("Add a scene"));
  const el = h("div", { class: "outline-editor" }, list, h("div", { class: "actions" }, addScene));

  function save() {
    sessionStorage.setItem(draftKey, JSON.stringify(items));
    onChange();
  }

  /** Change entry `i`; `structural` redraws the list (the focus goes back to `focusId`). */
  function edit(i, change, { structural = false, focusId = null } = {}) {
    change(items[i]);
    save();
    if (structural) draw(focusId);
  }

  function mediaRow(o, i, m, j) {
    const base = `item-${i}-media-${j}`;
    const prompt = h("input", { id: `${base}-prompt`, type: "text", value: m.prompt || "", required: true });
    prompt.addEventListener("input", () => edit(i, () => { o.mediaGenerations[j].prompt = prompt.value; }));
    const remove = h("button", { type: "button", class: "button small danger-outline" }, t("Remove"));
    remove.setAttribute("aria-label", t(m.type === "video" ? "Remove video request {n}" : "Remove picture request {n}", { n: j + 1 }));
    remove.addEventListener("click", () => edit(i, () => {
      o.mediaGenerations.splice(j, 1);
    }, { structural: true, focusId: `item-${i}-add-image` }));
    return h("li", { class: "media-request" },
      h("div", { class: "field" },
        h("label", { for: `${base}-prompt` }, t(m.type === "video" ? "Video: what it shows" : "Picture: what it shows")), prompt),
      h("div", { class: "field inline" },
        h("label", { for: `${base}-aspect` }, t("Aspect ratio")),
        select(`${base}-aspect`, ASPECTS.map((a) => [a, a]), m.aspectRatio || "16:9", (v) => edit(i, () => {
          o.mediaGenerations[j].aspectRatio = v;
        }))),
      remove);
  }

  function quizFields(o, i) {
    const q = o.quizConfig || DEFAULT_QUIZ;
    const count = h("input", { id: `item-${i}-questions`, type: "number", min: 1, max: 20, value: q.questionCount });
    count.addEventListener("input", () => {
      const n = Number(count.value);
      if (Number.isInteger(n) && n >= 1 && n <= 20) edit(i, () => { o.quizConfig = { ...(o.quizConfig || DEFAULT_QUIZ), questionCount: n }; });
    });
    const kinds = QUESTION_TYPES.map(([v, label]) => {
      const box = h("input", { type: "checkbox", id: `item-${i}-qt-${v}`, checked: q.questionTypes.includes(v) });
      box.addEventListener("change", () => edit(i, () => {
        const cur = new Set((o.quizConfig || DEFAULT_QUIZ).questionTypes);
        if (box.checked) cur.add(v);
        else if (cur.size > 1) cur.delete(v);
        else box.checked = true; // a quiz keeps at least one kind of question
        o.quizConfig = { ...(o.quizConfig || DEFAULT_QUIZ), questionTypes: QUESTION_TYPES.map(([x]) => x).filter((x) => cur.has(x)) };
      }));
      return h("span", { class: "check" }, box, h("label", { for: box.id }, t(label)));
    });
    return h("fieldset", { class: "quiz-settings" }, h("legend", {}, t("Quiz settings")),
      h("div", { class: "field inline" }, h("label", { for: count.id }, t("Number of questions")), count),
      h("div", { class: "field inline" }, h("label", { for: `item-${i}-difficulty` }, t("Difficulty")),
        select(`item-${i}-difficulty`, DIFFICULTIES, q.difficulty, (v) => edit(i, () => {
          o.quizConfig = { ...(o.quizConfig || DEFAULT_QUIZ), difficulty: v };
        }))),
      h("div", { class: "field" }, h("span", { class: "label" }, t("Question kinds")), h("div", { class: "checks" }, kinds)));
  }

  function entry(o, i) {
    const id = (f) => `item-${i}-${f}`;
    const title = h("input", { id: id("title"), type: "text", required: true, value: o.title });
    title.addEventListener("input", () => edit(i, () => { o.title = title.value; }));
    const description = h("textarea", { id: id("description"), rows: 2 }, o.description || "");
    description.addEventListener("input", () => edit(i, () => { o.description = description.value; }));
    const points = h("textarea", { id: id("points"), rows: 3, "aria-describedby": id("points-hint") }, (o.keyPoints || []).join("\n"));
    points.addEventListener("input", () => edit(i, () => {
      o.keyPoints = points.value.split("\n").map((x) => x.trim()).filter(Boolean);
    }));
    const type = select(id("type"), SCENE_TYPES, o.type, (v) => edit(i, () => {
      o.type = v;
      if (v === "quiz" && !o.quizConfig) o.quizConfig = { ...DEFAULT_QUIZ };
    }, { structural: true, focusId: id("type") }));
    const media = o.mediaGenerations || [];
    const addMedia = (kind) => {
      const b = h("button", { type: "button", class: "button small", id: id(`add-${kind}`) }, t(kind === "image" ? "Add a picture" : "Add a video"));
      b.addEventListener("click", () => edit(i, () => {
        const taken = new Set(items.flatMap((x) => (x.mediaGenerations || []).map((m) => m.elementId)));
        let n = 1;
        const prefix = kind === "image" ? "gen_img" : "gen_vid";
        while (taken.has(`${prefix}_${n}`)) n += 1;
        o.mediaGenerations = [...(o.mediaGenerations || []), { type: kind, prompt: "", elementId: `${prefix}_${n}`, aspectRatio: "16:9" }];
      }, { structural: true, focusId: `item-${i}-media-${media.length}-prompt` }));
      return b;
    };
    const move = (delta, label, name) => {
      const b = h("button", { type: "button", class: "button small", disabled: i + delta < 0 || i + delta >= items.length }, t(label));
      b.setAttribute("aria-label", t(name, { n: i + 1 }));
      b.addEventListener("click", () => {
        const [x] = items.splice(i, 1);
        items.splice(i + delta, 0, x);
        save();
        draw(`item-${i + delta}-title`);
      });
      return b;
    };
    const remove = h("button", { type: "button", class: "button small danger-outline", disabled: items.length <= 1 }, t("Remove scene"));
    remove.setAttribute("aria-label", t("Remove scene {n}", { n: i + 1 }));
    remove.addEventListener("click", () => {
      items.splice(i, 1);
      save();
      draw(`item-${Math.max(0, i - 1)}-title`);
    });
    return h("li", { dataset: { outlineId: o.id } }, h("fieldset", {},
      h("legend", {}, t("Scene {n}", { n: i + 1 })),
      h("div", { class: "field inline" }, h("label", { for: id("type") }, t("Type")), type),
      h("div", { class: "field" }, h("label", { for: id("title") }, t("Title")), title),
      h("div", { class: "field" }, h("label", { for: id("description") }, t("Description")), description),
      h("div", { class: "field" }, h("label", { for: id("points") }, t("Key points")),
        h("p", { class: "hint", id: id("points-hint") }, t("One per line.")), points),
      o.type === "quiz" ? quizFields(o, i) : null,
      h("fieldset", { class: "media-settings" }, h("legend", {}, t("Pictures and videos")),
        media.length ? h("ul", { class: "media-requests" }, media.map((m, j) => mediaRow(o, i, m, j))) : h("p", { class: "hint" }, t("None requested.")),
        h("div", { class: "actions" }, addMedia("image"), addMedia("video"))),
      h("div", { class: "actions entry-actions" }, move(-1, "Move up", "Move scene {n} up"), move(1, "Move down", "Move scene {n} down"), remove)));
  }

  function draw(focusId) {
    list.replaceChildren(...items.map(entry));
    if (focusId) document.getElementById(focusId)?.focus();
  }

  addScene.addEventListener("click", () => {
    items.push({ id: newId("new"), type: "slide", title: t("New scene"), description: "", keyPoints: [], order: items.length + 1 });
    save();
    draw(`item-${items.length - 1}-title`);
  });
  draw(null);
  return { el, items: () => items };
}
