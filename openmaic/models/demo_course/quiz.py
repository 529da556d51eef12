"""The quiz answer: a JSON array of questions (COURSE-FORMAT §3.4) about the scene's key points.

The question types of ``quizConfig`` are dealt in turn until ``questionCount`` is reached. A choice question
has four options ``A``–``D`` and its answer as option values; the correct option moves from question to question
(never the same letter for every question); wrong options are statements that sound plausible but contradict
what the course taught. A short answer carries a grading rubric in ``commentPrompt``. Harder quizzes give more
points.
"""

from __future__ import annotations

import re
from typing import Any

from openmaic.models.demo_course.brief import scene_of, seed, strings, text_of
from openmaic.models.demo_course.language import EN, ZH, course_language, pick
from openmaic.models.demo_course.subjects import find_subject, pick_lang
from openmaic.models.demo_course.topic import topic_phrase

LETTERS = "ABCD"
_TYPES = ("single", "multiple", "short_answer")
_POINTS = {"easy": (1, 2, 3), "medium": (2, 3, 4), "hard": (2, 4, 5)}

_WRONG = {
    EN: [
        "It only matters to specialists and never in daily life",
        "It works the same way in every situation, with no exceptions",
        "Memorising the terms is enough to use it well",
        "It was disproved long ago and is no longer taught",
        "The order of the steps never makes a difference",
        "It has nothing to do with the other ideas of this course",
        "Only the final answer counts, never the reasoning",
    ],
    ZH: [
        "它只和专家有关，日常生活中用不到",
        "它在任何情况下都完全一样，没有例外",
        "只要背下术语就能用好它",
        "它早已被推翻，现在不再教授",
        "步骤的先后顺序从来不影响结果",
        "它和本课程的其他内容毫无关系",
        "只看最终答案，推理过程无关紧要",
    ],
}


def _config(scene: dict[str, Any]) -> tuple[int, str, list[str]]:
    cfg = scene.get("quizConfig") if isinstance(scene.get("quizConfig"), dict) else {}
    count = cfg.get("questionCount")
    count = count if isinstance(count, int) and 1 <= count <= 10 else 3
    difficulty = cfg.get("difficulty") if cfg.get("difficulty") in _POINTS else "medium"
    types = [t for t in strings(cfg.get("questionTypes")) if t in _TYPES] or ["single"]
    return count, difficulty, types


def _points(scene: dict[str, Any], lang: str) -> list[str]:
    points = [re.sub(r"^\s*\[(?:chart|table|formula)\]\s*", "", p, flags=re.I) for p in strings(scene.get("keyPoints"))]
    points = [p for p in points if p]
    if not points:
        points = [text_of(scene.get("description"), text_of(scene.get("title"), pick(lang, "The key idea", "核心概念")))]
    return points


def _choice(lang: str, right: list[str], wrong: list[str], first: int) -> tuple[list[dict[str, str]], list[str]]:
    """Four options with the right ones placed from position ``first`` on (wrapping), and the answer values."""
    slots: list[str | None] = [None] * 4
    for k, r in enumerate(right):
        slots[(first + 2 * k) % 4] = r
    rest = iter(wrong)
    options = [s if s is not None else next(rest) for s in slots]
    answer = [LETTERS[i] for i, s in enumerate(slots) if s is not None]
    return [{"label": o, "value": LETTERS[i]} for i, o in enumerate(options)], answer


def quiz(brief: dict[str, Any]) -> list[dict[str, Any]]:
    """The questions for a ``quiz`` brief."""
    lang = course_language(brief)
    scene = scene_of(brief)
    count, difficulty, types = _config(scene)
    points = _points(scene, lang)
    topic = topic_phrase(text_of(brief.get("requirement"))) or text_of(scene.get("title"), pick(lang, "this topic", "本主题"))
    s = seed("quiz", text_of(brief.get("requirement")), text_of(scene.get("title")))
    subject = find_subject(topic, text_of(brief.get("requirement")))
    myths = pick_lang(subject.myths, lang == ZH) if subject else []
    wrong_pool = _WRONG[lang]
    worth = dict(zip(_TYPES, _POINTS[difficulty], strict=True))
    questions: list[dict[str, Any]] = []
    for i in range(count):
        kind = types[i % len(types)]
        point = points[i % len(points)]
        # The subject's misconceptions make the best wrong options; general ones fill up.
        general = [wrong_pool[(s + i * 3 + k) % len(wrong_pool)] for k in range(3)]
        wrong = (myths[i % len(myths):] + myths[: i % len(myths)] if myths else [])[:2] + general
        wrong = list(dict.fromkeys(wrong))[:3]
        q: dict[str, Any] = {"id": f"q_{i + 1}", "type": kind, "points": worth[kind]}
        if kind == "short_answer":
            q["question"] = pick(
                lang,
                f"In your own words, explain this key point of {topic} and give one example: “{point}”.",
                f"请用自己的话解释{topic}的这个要点，并举一个例子：“{point}”。",
            )
            q["analysis"] = pick(
                lang,
                f"A good answer restates “{point}” accurately and backs it with a concrete, fitting example.",
                f"好的回答应准确复述“{point}”，并给出一个具体、恰当的例子。",
            )
            q["commentPrompt"] = pick(
                lang,
                f"Grade out of {worth[kind]}. Full marks: the answer explains “{point}” correctly in the learner's "
                "own words and gives a relevant example. Partial credit: a correct explanation without an example, "
                "or an example with a vague explanation. No credit: off-topic or contradicts the point. Reply with a "
                "short, encouraging comment naming one thing to improve.",
                f"满分{worth[kind]}分。满分：用自己的话正确解释“{point}”，并给出相关例子。部分得分：解释正确但没有例子，"
                "或有例子但解释含糊。不得分：答非所问或与要点相矛盾。请用简短、鼓励的语气点评，并指出一处可改进的地方。",
            )
        else:
            # Consecutive questions move the correct option by three places, so no two neighbours share it.
            first = (s + 3 * i) % 4
            if kind == "multiple":
                other = points[(i + 1) % len(points)] if len(points) > 1 else None
                right = [point, other] if other and other != point else [point]
                q["question"] = pick(
                    lang,
                    f"Which of the following are key points of {topic}? Choose all that apply.",
                    f"下列哪些是{topic}的要点？（多选）",
                )
                q["options"], q["answer"] = _choice(lang, right, wrong, first)
                q["analysis"] = pick(
                    lang,
                    "The correct options are the key points the course presented; the others contradict them.",
                    "正确选项都是课程讲过的要点；其余选项与所学内容相矛盾。",
                )
            else:
                q["question"] = pick(
                    lang,
                    f"Which statement about {topic} matches what the course presented?",
                    f"关于{topic}，下列哪一项与课程所讲一致？",
                )
                q["options"], q["answer"] = _choice(lang, [point], wrong, first)
                q["analysis"] = pick(
                    lang,
                    f"“{point}” is one of the key points; the other statements sound plausible but are wrong.",
                    f"“{point}”是课程讲到的要点；其他说法看似合理，实则错误。",
                )
        questions.append(q)
    return questions
