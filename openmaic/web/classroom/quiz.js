// Quiz scenes (OPENMAIC-COURSE-FORMAT §3.4, §8.8): a cover (question count, total points), then the questions —
// single choice as radios, multiple choice as check boxes, anything else as a text box — each with its points.
// Submitting needs every question answered. Choices are graded here (selected values against `answer` as sets;
// a match earns `points`, default 1); short answers go to OpenMAIC's grading route (`POST /api/quiz-grade`)
// when the server has one, else they show the explanation and are marked "not graded" (no points either way).
// The score of each quiz scene is kept for the course's completion page.
//
// Every phase of an attempt is kept as the learner's runtime records (progress.js): the answers as a draft while
// they are written, then submitted, then reviewed with each question's result and the score. A reload or another
// device shows the newest attempt of each quiz as it was left (a reviewed one with its review); a retry starts a
// new attempt.

import { language, t } from "./i18n.js";
import { newAttempt, saveAttempt } from "./progress.js";
import { authHeaders, fill, h } from "./util.js";

/** Scene id -> {score, total}: the graded quizzes (this visit's and the kept ones). */
export const scores = new Map();
const answersOf = new Map(); // scene id -> {question id -> value}, kept while the learner moves around
const reviewOf = new Map(); // scene id -> {results: {question id -> grade}, score, total}
const DRAFT_DELAY_MS = 800;

/** Show the attempts kept for this learner (scene id -> `{phase, answers, results, score, total}`). */
export function restoreAttempts(attempts) {
  for (const [sceneId, a] of attempts) {
    answersOf.set(sceneId, a.answers && typeof a.answers === "object" ? { ...a.answers } : {});
    if (a.phase === "reviewed" && a.results && typeof a.results === "object") {
      reviewOf.set(sceneId, { results: a.results, score: Number(a.score) || 0, total: Number(a.total) || 0 });
      scores.set(sceneId, { score: Number(a.score) || 0, total: Number(a.total) || 0 });
    }
  }
}

const pointsOf = (q) => (Number.isFinite(q.points) ? q.points : 1);
const isChoice = (q) => q.type === "single" || q.type === "multiple";

/** Grade a choice question: the selected values and `answer` compared as sets. */
export function gradeChoice(q, value) {
  const picked = new Set(Array.isArray(value) ? value : value ? [value] : []);
  const right = new Set(q.answer || []);
  const ok = isChoice(q) && picked.size === right.size && [...picked].every((v) => right.has(v));
  return { correct: ok, score: ok ? pointsOf(q) : 0, graded: true };
}

/** Grade a short answer with the model (`/api/quiz-grade`): as OpenMAIC's quiz view does, the answer counts as
 * correct at 80 % of its points or more and as incorrect below, whatever it earned; the points earned are shown
 * beside the verdict. */
async function gradeShort(q, value) {
  try {
    const r = await fetch("/api/quiz-grade", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", ...authHeaders() },
      body: JSON.stringify({ question: q.question, userAnswer: value, points: pointsOf(q),
        commentPrompt: q.commentPrompt, language: language() }),
    });
    if (!r.ok) return { correct: false, score: 0, graded: false };
    const body = await r.json();
    const score = Math.max(0, Math.min(pointsOf(q), Number(body.score ?? body.result?.score) || 0));
    return { correct: score >= 0.8 * pointsOf(q), score, graded: true, comment: body.comment ?? body.result?.comment };
  } catch {
    return { correct: false, score: 0, graded: false };
  }
}

function field(q, qi, name, saved, onInput) {
  if (isChoice(q)) {
    const type = q.type === "single" ? "radio" : "checkbox";
    return h("ul", { class: "options" }, (q.options || []).map((o, oi) => {
      const id = `${name}-${oi}`;
      const checked = Array.isArray(saved) ? saved.includes(o.value) : saved === o.value;
      return h("li", { class: "option", dataset: { value: o.value } },
        h("input", { type, id, name, value: o.value, checked, onchange: onInput }),
        h("label", { for: id }, h("span", { class: "letter", "aria-hidden": "true" }, o.value), o.label));
    }));
  }
  return h("textarea", { id: `${name}-text`, rows: "3", "aria-label": t("yourAnswer"), oninput: onInput },
    typeof saved === "string" ? saved : "");
}

function valueOf(q, node) {
  if (q.type === "single") return node.querySelector("input:checked")?.value || null;
  if (q.type === "multiple") return [...node.querySelectorAll("input:checked")].map((i) => i.value);
  return node.querySelector("textarea")?.value || "";
}

const answered = (q, v) => (q.type === "multiple" ? Array.isArray(v) && v.length > 0 : !!(v && String(v).trim()));

/** The quiz view of a scene; `onGraded(score, total)` hears each submission. */
export function quizView(scene, { onGraded = () => {} } = {}) {
  const listed = scene.content?.questions;
  const questions = Array.isArray(listed) ? listed.filter((q) => q && typeof q === "object") : [];
  const total = questions.reduce((sum, q) => sum + pointsOf(q), 0);
  const saved = answersOf.get(scene.id) || {};
  answersOf.set(scene.id, saved);
  const submit = h("button", { type: "submit", class: "button primary", disabled: true }, t("submit"));
  const hint = h("p", { class: "hint" }, t("answerAll"));
  const result = h("p", { class: "quiz-score", role: "status" });
  const items = questions.map((q, qi) => {
    const name = `q-${scene.id}-${qi}`;
    const node = h("fieldset", { class: "quiz-question", dataset: { questionId: q.id, type: q.type } });
    node.append(h("legend", {}, h("span", { class: "q-number" }, `${qi + 1}. `), q.question,
      h("span", { class: "q-points" }, ` (${t("points", { points: pointsOf(q) })})`)),
    field(q, qi, name, saved[q.id], () => {
      saved[q.id] = valueOf(q, node);
      const all = questions.every((qq) => answered(qq, saved[qq.id]));
      submit.disabled = !all;
      hint.hidden = all;
    }), h("div", { class: "quiz-review" }));
    return node;
  });
  const form = h("form", { class: "quiz", novalidate: true },
    h("p", { class: "quiz-cover" }, t("quizCover", { count: questions.length, points: total })),
    items, h("div", { class: "quiz-actions" }, submit, hint), result);
  const all = questions.every((q) => answered(q, saved[q.id]));
  submit.disabled = !all;
  hint.hidden = all;

  const review = (graded, score) => {
    form.querySelectorAll("input, textarea").forEach((i) => {
      i.disabled = true;
    });
    submit.disabled = true;
    graded.forEach((g, qi) => {
      const q = questions[qi];
      const node = items[qi];
      node.dataset.result = g.graded ? (g.correct ? "correct" : "incorrect") : "not-graded";
      const verdict = g.graded ? t(g.correct ? "correct" : "incorrect") : t("notGraded");
      const right = isChoice(q) ? (q.options || []).filter((o) => (q.answer || []).includes(o.value)) : [];
      for (const li of node.querySelectorAll(".option")) {
        if ((q.answer || []).includes(li.dataset.value)) li.classList.add("correct");
        else if (li.querySelector("input:checked")) li.classList.add("wrong");
      }
      fill(node.querySelector(".quiz-review"),
        h("p", { class: `verdict ${node.dataset.result}` }, verdict,
          g.graded && !isChoice(q) ? ` · ${t("earned", { score: g.score, total: pointsOf(q) })}` : ""),
        right.length ? h("p", {}, t("correctAnswer", { answer: right.map((o) => `${o.value}. ${o.label}`).join("; ") }))
          : null,
        g.comment ? h("p", { class: "grader-comment" }, h("strong", {}, `${t("comment")}: `), g.comment) : null,
        q.analysis ? h("p", { class: "analysis" }, h("strong", {}, `${t("analysis")}: `), q.analysis) : null);
    });
    result.textContent = t("score", { score, total });
    result.dataset.score = String(score);
    form.dataset.state = "graded";
    form.append(h("button", { type: "button", class: "button", onclick: () => {
      answersOf.delete(scene.id);
      reviewOf.delete(scene.id);
      scores.delete(scene.id);
      newAttempt(scene.id);
      form.replaceWith(quizView(scene, { onGraded }));
    } }, t("retry")));
  };

  let draftTimer = null;
  form.addEventListener("input", () => {
    clearTimeout(draftTimer);
    draftTimer = setTimeout(() => saveAttempt(scene.id, { phase: "draft", answers: { ...saved } }), DRAFT_DELAY_MS);
  });

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (submit.disabled) return;
    clearTimeout(draftTimer);
    submit.disabled = true;
    form.querySelectorAll("input, textarea").forEach((i) => {
      i.disabled = true;
    });
    form.dataset.state = "grading";
    const answers = { ...saved };
    saveAttempt(scene.id, { phase: "submitted", answers });
    const graded = await Promise.all(questions.map((q) => (isChoice(q) ? gradeChoice(q, saved[q.id])
      : gradeShort(q, saved[q.id]))));
    const score = graded.reduce((sum, g) => sum + g.score, 0);
    const results = Object.fromEntries(questions.map((q, qi) => [q.id, graded[qi]]));
    scores.set(scene.id, { score, total });
    reviewOf.set(scene.id, { results, score, total });
    review(graded, score);
    await saveAttempt(scene.id, { phase: "reviewed", answers, results, score, total });
    onGraded(score, total);
  });

  const kept = reviewOf.get(scene.id);
  if (kept) {
    review(questions.map((q) => kept.results[q.id] || { correct: false, score: 0, graded: false }), kept.score);
  }
  return form;
}
