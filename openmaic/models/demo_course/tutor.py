"""The demo model in the classroom: grading a short answer (``step: "grade"``) and answering the learner as one of
the course's agents (``step: "tutor"``), from the brief alone and the same way every time.

A short answer earns the share of the rubric's (or else the question's) content words it uses, at least a fifth
of the points when it says anything of substance; the comment names what it covered and what it left out. A
reply takes the scene's title and its first lines of text or speech, and answers in the course's language; a
classmate's follow-up in a discussion (``followUp``: the lead agent's name) adds the scene's last line.
"""

from __future__ import annotations

import re
from typing import Any

from openmaic.models.demo_course.brief import text_of
from openmaic.models.demo_course.language import EN, ZH, pick

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}|[\u4e00-\u9fff]")
_STOP = frozenset(
    "the and for are but not you your with that this what which why how who when where does did was were has have "
    "had its it's from into than then them they their there these those can could should would will shall about "
    "more most some any all each one two also only very just explain describe answer learner question give name "
    "list state short".split()
)


def _lang(brief: dict[str, Any]) -> str:
    tag = brief.get("language")
    return ZH if isinstance(tag, str) and tag.lower().startswith("zh") else EN


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP}


def grade(brief: dict[str, Any]) -> dict[str, Any]:
    """``{score, comment}`` for the short answer in ``brief``."""
    lang = _lang(brief)
    points = brief.get("points")
    points = float(points) if isinstance(points, int | float) and not isinstance(points, bool) and points > 0 else 1.0
    answer = text_of(brief.get("userAnswer"))
    key = _words(text_of(brief.get("commentPrompt")) or text_of(brief.get("question")))
    said = _words(answer)
    covered = sorted(key & said)
    missed = sorted(key - said)
    if not said:
        return {"score": 0, "comment": pick(lang, "The answer says nothing about the question yet.",
                                            "这个回答还没有涉及问题的内容。")}
    share = len(covered) / len(key) if key else 0.5
    score = round(points * max(0.2, min(1.0, share * 1.5)), 1)
    if covered:
        good = pick(lang, f"You mention {', '.join(covered[:3])}.", f"你提到了{'、'.join(covered[:3])}。")
    else:
        good = pick(lang, "You answer in your own words.", "你用自己的话作了回答。")
    more = (pick(lang, f" Say more about {', '.join(missed[:3])}.", f"还可以多谈谈{'、'.join(missed[:3])}。")
            if missed and score < points else "")
    return {"score": score, "comment": good + more}


def tutor(brief: dict[str, Any]) -> str:
    """The agent's short reply, grounded in the brief's scene."""
    lang = _lang(brief)
    scene = brief.get("scene") if isinstance(brief.get("scene"), dict) else {}
    title = text_of(scene.get("title"))
    lines = [text_of(t) for t in [*(scene.get("speech") or []), *(scene.get("texts") or [])] if text_of(t)]
    topic = text_of(brief.get("topic"))
    agent = brief.get("agent") if isinstance(brief.get("agent"), dict) else {}
    name = text_of(agent.get("name"), pick(lang, "your teacher", "老师"))
    point = lines[0][:160] if lines else ""
    lead = text_of(brief.get("followUp"))
    if lead:  # a classmate's short follow-up to the lead agent's answer in a discussion
        last = lines[-1][:160] if lines else title
        if lang == ZH:
            return f"我是{name}。我补充一下{lead}说的：{last} 这在生活中是什么样子呢？"
        return f"{name} here. Adding to what {lead} said: {last} I wonder where we see that in real life?"
    if lang == ZH:
        head = f"我是{name}。" + (f"关于“{topic}”：" if topic else "好问题！")
        body = (f"这一节“{title}”讲的是：{point}" if title and point
                else f"这一节讲的是“{title}”。" if title else "")
        return f"{head}{body} 你觉得其中哪一点最关键？"
    head = f"{name} here. " + (f"On “{topic}”: " if topic else "Good question! ")
    body = (f"In “{title}”, the key idea is: {point}" if title and point
            else f"This scene is about “{title}”." if title else "Let us look at it together.")
    return f"{head}{body} Which part of it would you like to go through again?"
