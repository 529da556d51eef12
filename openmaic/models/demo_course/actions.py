"""The actions answer: a JSON array of ``{"type": "text", "content"}`` and ``{"type": "action", "name", "params"}``.

Slides: the teacher greets on the first scene and links back to the previous one on later scenes; each element
worth talking about gets a spotlight (a laser for pictures) just before the speech about it, a video gets a
speech introducing it and then ``play_video``; a formula or a sequence of steps is also worked through on the
whiteboard; one middle slide of the course ends with a discussion opened by a student. Quizzes get one neutral
framing speech. Interactive scenes get speech and widget actions on the selectors the page really has. Element
ids are only ever taken from the brief's ``elements``.
"""

from __future__ import annotations

import re
from typing import Any

from openmaic.models.demo_course.brief import outline_titles, scene_of, seed, strings, text_of
from openmaic.models.demo_course.knowledge import find_model, lower_label, sample
from openmaic.models.demo_course.language import EN, ZH, course_language, pick, sentence
from openmaic.models.demo_course.topic import topic_phrase

_LEAD = re.compile(r"^[\s•●·\-–*\d.、)）]+")
_MARKER = re.compile(r"^\s*\[(?:chart|table|formula)\]\s*", re.I)
_STEP = re.compile(r"^\s*(?:step\s*\d+\s*[:.)-]\s*|第[一二三四五六七八九十\d]+步[：:]\s*)", re.I)


_QUIZ_TITLE = re.compile(r"\bquiz\b|check your|测验|检测|练习题|挑战", re.I)
_HANDS_ON_TITLE = re.compile(r"\bexplore\b|yourself|hands-on|动手|探索|互动", re.I)


def _say(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text}


def _act(name: str, **params: Any) -> dict[str, Any]:
    return {"type": "action", "name": name, "params": params}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", _LEAD.sub("", text)).strip().lower()


def _elements(brief: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    for e in brief.get("elements") or []:
        if isinstance(e, dict) and text_of(e.get("id")):
            out.append({"id": text_of(e.get("id")), "type": text_of(e.get("type")), "summary": text_of(e.get("summary"))})
    return out


def _points_in(summary: str, points: list[str]) -> list[str]:
    """The key points an element's summary shows (by a shared opening)."""
    s = _norm(summary)
    if len(s) < 2:
        return []
    found = []
    for p in points:
        q = _norm(p)
        head = min(len(q), len(s), 14)
        if head >= 2 and (s.startswith(q[:head]) or q.startswith(s[:head])):
            found.append(p)
    return found


def _outline_entries(brief: dict[str, Any]) -> list[dict[str, Any]]:
    return [o if isinstance(o, dict) else {"title": o} for o in brief.get("outlines") or [] if isinstance(o, (dict, str))]


def _order(brief: dict[str, Any], title: str) -> int:
    scene = scene_of(brief)
    if isinstance(scene.get("order"), int):
        return scene["order"]
    titles = outline_titles(brief)
    return titles.index(title) + 1 if title in titles else 0


def discussion_order(brief: dict[str, Any]) -> int:
    """The order of the one scene of the course that ends with a discussion: a middle slide near the centre."""
    entries = _outline_entries(brief)
    n = len(entries)
    if n < 3:
        return 0
    candidates = [i + 1 for i, o in enumerate(entries) if 0 < i < n - 1 and _kind(o) == "slide"]
    if not candidates:
        return 0
    middle = (n + 1) / 2
    return min(candidates, key=lambda k: (abs(k - middle), k))


def _student(brief: dict[str, Any]) -> str | None:
    agents = [a for a in brief.get("agents") or [] if isinstance(a, dict) and text_of(a.get("id"))]
    students = [a for a in agents if a.get("role") == "student"] or [a for a in agents if a.get("role") != "teacher"]
    if not students:
        return None
    return text_of(students[seed("student", text_of(brief.get("requirement"))) % len(students)].get("id"))




def _kind(entry: dict[str, Any]) -> str:
    """An outline entry's scene type, guessed from its title when the outlines are titles only."""
    title = text_of(entry.get("title"))
    return text_of(entry.get("type")) or (
        "quiz" if _QUIZ_TITLE.search(title) else "interactive" if _HANDS_ON_TITLE.search(title) else "slide"
    )


def _previous(brief: dict[str, Any], order: int) -> tuple[str, str]:
    """The previous scene's title and type."""
    entries = _outline_entries(brief)
    if not 2 <= order <= len(entries) + 1:
        return "", ""
    prev = entries[order - 2]
    return text_of(prev.get("title")), _kind(prev)


def _opening(brief: dict[str, Any], lang: str, title: str, order: int, topic: str) -> str:
    """The first words of a slide: a greeting on the first, a link back to the previous scene on the others.

    The outline's description is an instruction to the writer ("Set the scene for …"), so it is never read out.
    """
    position = text_of(brief.get("position"))
    if position == "first" or order == 1:
        course = text_of(brief.get("courseTitle"), topic)
        return pick(
            lang,
            f"Hello everyone, and welcome! In this course, {course}, we take a close look at {topic}. "
            "Let's start with the big picture.",
            f"同学们好，欢迎来到“{course}”！这门课我们一起深入学习{topic}。先从整体上认识一下它。",
        )
    previous, kind = _previous(brief, order)
    if position == "last":
        return pick(
            lang,
            f"We have reached the final page. Let's pull together what we learned about {topic}.",
            f"我们来到了最后一页，一起把关于{topic}的所学串联起来。",
        )
    if kind == "quiz":
        return pick(lang, f"Now that you have checked your understanding, let's move on to {title}.",
                    f"检验完刚才的学习成果，我们继续学习“{title}”。")  # fmt: skip
    if kind == "interactive":
        return pick(lang, f"After trying it out with your own hands, let's look at {title}.",
                    f"亲手操作之后，我们来看“{title}”。")  # fmt: skip
    if previous:
        return pick(
            lang,
            f"As we just saw in “{previous}”, the groundwork is in place. Now let's turn to {title}.",
            f"刚才在“{previous}”中我们打好了基础，接下来看看“{title}”。",
        )
    return pick(lang, f"Building on what we just saw, let's turn to {title}.", f"在刚才内容的基础上，我们来看“{title}”。")


_CONNECT = {
    EN: ["First: {p}.", "Next: {p}.", "Notice also: {p}.", "And one more: {p}.", "Finally: {p}."],
    ZH: ["首先，{p}。", "接着，{p}。", "还要注意，{p}。", "再看一点，{p}。", "最后，{p}。"],
}


_ELABORATE = {
    EN: [
        "Keep this in mind, because the next ideas build on it.",
        "Try to picture one example of it as we go.",
        "Many learners skip over this, so it is worth a pause.",
        "Take a moment to connect it with what you already know.",
        "We will come back to this later in the course.",
    ],
    ZH: [
        "记住这一点，后面的内容都建立在它之上。",
        "边听边想一个具体的例子。",
        "很多同学容易忽略这一点，值得停下来想一想。",
        "花点时间把它和你已经知道的内容联系起来。",
        "课程后面还会用到这一点。",
    ],
}


def _explain(lang: str, points: list[str], start: int) -> str:
    out = []
    for k, p in enumerate(points):
        template = _CONNECT[lang][min(start + k, 4)]
        out.append(template.format(p=p.rstrip("。.")))
        out.append(_ELABORATE[lang][(start + k) % len(_ELABORATE[lang])])
    return " ".join(out) if lang == EN else "".join(out)


def _assign(elements: list[dict[str, str]], points: list[str]) -> dict[str, list[str]]:
    """Which key points each text or shape element shows.

    A summary is only the opening of an element's text, so an element that starts with point k is taken to
    hold the points from k up to the next point another element starts with.
    """
    starts: dict[int, str] = {}
    for e in elements:
        if e["type"] not in ("text", "shape"):
            continue
        shown = _points_in(e["summary"], points)
        if shown:
            k = points.index(shown[0])
            starts.setdefault(k, e["id"])
    out: dict[str, list[str]] = {}
    ordered = sorted(starts)
    for n, k in enumerate(ordered):
        end = ordered[n + 1] if n + 1 < len(ordered) else len(points)
        out[starts[k]] = points[k:end]
    return out


def _whiteboard_formula(lang: str, tex: str, topic: str) -> list[dict[str, Any]]:
    return [
        _act("wb_open"),
        _say(pick(lang, "Let me write it out on the whiteboard and read it piece by piece.",
                  "我把它写到白板上，我们逐项来读。")),  # fmt: skip
        _act("wb_draw_latex", latex=tex, x=100, y=80, width=800, height=110, color="#1e293b"),
        _act("wb_draw_line", startX=500, startY=210, endX=500, endY=280, color="#2563eb", width=3,
             points=["", "arrow"]),  # fmt: skip
        _act("wb_draw_text", content=pick(lang, f"Each symbol is one quantity of {topic}; the equals sign ties them "
                                                "together.", f"每个符号代表{topic}中的一个量，等号把它们联系在一起。"),
             x=150, y=300, width=700, height=90, fontSize=22, color="#1e293b"),  # fmt: skip
        _say(pick(lang, "Read it from left to right: change one quantity on the right and the left side follows.",
                  "从左往右读：右边任何一个量变化，左边都会随之变化。")),  # fmt: skip
        _act("wb_close"),
    ]


def _whiteboard_steps(lang: str, labels: list[str]) -> list[dict[str, Any]]:
    labels = labels[:3]
    out: list[dict[str, Any]] = [
        _act("wb_open"),
        _say(pick(lang, "Let me sketch the sequence on the whiteboard.", "我在白板上把这个顺序画出来。")),
    ]
    for i, label in enumerate(labels):
        y = 60 + i * 160
        label = _STEP.sub("", label) or label
        out.append(_act("wb_draw_text", content=f"{i + 1}. {label}", x=250, y=y, width=500, height=70, fontSize=22,
                        color="#1e293b"))  # fmt: skip
        if i < len(labels) - 1:
            out.append(_act("wb_draw_line", startX=500, startY=y + 80, endX=500, endY=y + 150, color="#2563eb",
                            width=3, points=["", "arrow"]))  # fmt: skip
    out.append(_say(pick(lang, "Each step hands its result to the next one, so the order matters.",
                         "每一步都把结果交给下一步，所以顺序很重要。")))  # fmt: skip
    out.append(_act("wb_close"))
    return out


def _slide(brief: dict[str, Any], lang: str) -> list[dict[str, Any]]:
    scene = scene_of(brief)
    title = text_of(scene.get("title"), pick(lang, "this page", "本页"))
    points = [_MARKER.sub("", p) for p in strings(scene.get("keyPoints"))]
    requirement = text_of(brief.get("requirement"))
    topic = topic_phrase(requirement) or title
    order = _order(brief, title)
    elements = _elements(brief)
    items: list[dict[str, Any]] = []
    texts = [e for e in elements if e["type"] == "text"]
    title_el = next((e for e in texts if _norm(title)[:10] and _norm(e["summary"]).startswith(_norm(title)[:10])), None)
    title_el = title_el or (texts[0] if texts else (elements[0] if elements else None))
    if title_el is not None:
        items.append(_act("spotlight", elementId=title_el["id"], dimOpacity=0.5))
    items.append(_say(_opening(brief, lang, title, order, topic)))

    held = _assign([e for e in elements if e is not title_el], points)
    covered: list[str] = []
    talks = 0
    steps: list[str] = []
    board: list[dict[str, Any]] = []
    for e in elements:
        if e is title_el or talks >= 5:
            continue
        kind = e["type"]
        if kind in ("text", "shape"):
            shown = [p for p in held.get(e["id"], []) if p not in covered]
            if not shown:
                continue
            if kind == "shape":
                steps += shown
            items.append(_act("spotlight", elementId=e["id"], dimOpacity=0.5))
            items.append(_say(_explain(lang, shown, len(covered))))
            covered += shown
            talks += 1
        elif kind == "image":
            items.append(_act("laser", elementId=e["id"], color="#ff0000"))
            items.append(_say(pick(lang, f"Take a look at this picture: it shows the main parts of {topic} at a glance.",
                                   f"请看这张图：它直观地展示了{topic}的主要组成部分。")))  # fmt: skip
            talks += 1
        elif kind == "video":
            items.append(_say(pick(lang, f"Now let's watch a short video that shows {topic} in motion.",
                                   f"接下来我们看一段短视频，直观感受{topic}的过程。")))  # fmt: skip
            items.append(_act("play_video", elementId=e["id"]))
            talks += 1
        elif kind == "latex":
            model = find_model(topic, requirement, title)
            tex = model.latex if model is not None else e["summary"]
            items.append(_act("spotlight", elementId=e["id"], dimOpacity=0.6))
            items.append(_say(pick(lang, "Here is the formula at the heart of this page.", "这就是本页的核心公式。")))
            if tex:
                board = _whiteboard_formula(lang, tex, topic)
            talks += 1
        elif kind == "chart":
            items.append(_act("spotlight", elementId=e["id"], dimOpacity=0.5))
            items.append(_say(_chart_speech(lang, topic, requirement, title)))
            talks += 1
        elif kind == "table":
            items.append(_act("laser", elementId=e["id"], color="#ff0000"))
            items.append(_say(pick(lang, "The table puts the parts side by side; read it row by row.",
                                   "表格把各部分并排列出，我们一行一行地看。")))  # fmt: skip
            talks += 1
    rest = [p for p in points if p not in covered]
    if rest:
        items.append(_say(_explain(lang, rest, len(covered))))
    if not board and len(steps) >= 3:
        board = _whiteboard_steps(lang, steps)
    items += board
    position = text_of(brief.get("position"))
    if position == "last":
        items.append(_say(pick(lang, f"That brings our course on {topic} to a close. Thank you for learning with me, "
                                     "and keep practising!", f"关于{topic}的课程就到这里。感谢大家的参与，课后记得多练习！")))  # fmt: skip
    elif order and order == discussion_order(brief) and position != "first":
        student = _student(brief)
        params: dict[str, Any] = {
            "topic": pick(lang, f"Where have you met {topic} outside this course, and what did you notice?",
                          f"你在课堂之外的哪些地方遇到过{topic}？你注意到了什么？"),
            "prompt": pick(lang, "Share one concrete example and connect it to a key point of this page.",
                           "举一个具体的例子，并把它和本页的一个要点联系起来。"),
        }  # fmt: skip
        if student:
            params["agentId"] = student
        items.append(_act("discussion", **params))
    return items


def _chart_speech(lang: str, topic: str, requirement: str, title: str) -> str:
    model = find_model(topic, requirement, title)
    if model is None:
        return pick(lang, "The chart shows how the numbers change; look for the overall trend.",
                    "图表展示了数据的变化，请注意整体趋势。")  # fmt: skip
    var, _, ys = sample(model)
    rising = ys[-1] >= ys[0]
    name = var.label[1] if lang == ZH else lower_label(var.label[0])
    result = model.result[1] if lang == ZH else lower_label(model.result[0])
    if rising:
        return pick(lang, f"Read the chart from left to right: as the {name} grows, the {result} rises too.",
                    f"从左往右看这张图：{name}越大，{result}也越大。")  # fmt: skip
    return pick(lang, f"Read the chart from left to right: as the {name} grows, the {result} falls.",
                f"从左往右看这张图：{name}越大，{result}反而越小。")  # fmt: skip


def _quiz(brief: dict[str, Any], lang: str) -> list[dict[str, Any]]:
    questions = brief.get("questions") if isinstance(brief.get("questions"), list) else []
    n = len(questions) or 3
    return [_say(pick(
        lang,
        f"Time for a short check: {n} questions. Take your time, answer each one on your own, and we will go "
        "through them together after you submit.",
        f"现在来做一个小测验，共{n}道题。请独立思考、认真作答，提交之后我们再一起讲解。",
    ))]  # fmt: skip


def _selector(selectors: list[str], *wanted: str) -> str | None:
    for w in wanted:
        for s in selectors:
            if w in s:
                return s
    return None


def _interactive(brief: dict[str, Any], lang: str) -> list[dict[str, Any]]:
    scene = scene_of(brief)
    widget = brief.get("widget") if isinstance(brief.get("widget"), dict) else {}
    selectors = strings(widget.get("selectors"))
    config = widget.get("config") if isinstance(widget.get("config"), dict) else {}
    kind = text_of(widget.get("type"), text_of(scene.get("widgetType"), "simulation"))
    title = text_of(scene.get("title"), pick(lang, "this activity", "这个活动"))
    items = [_say(pick(lang, f"Now it's your turn: in {title}, you can explore the ideas with your own hands.",
                       f"现在轮到你动手了：在“{title}”中，你可以亲自探索刚才学到的内容。"))]  # fmt: skip
    if kind == "simulation":
        variables = [v for v in config.get("variables") or [] if isinstance(v, dict) and text_of(v.get("name"))]
        slider = _selector(selectors, "-slider")
        if slider:
            items.append(_act("widget_highlight", target=slider,
                              content=pick(lang, "Start with this slider", "先从这个滑块开始")))  # fmt: skip
            items.append(_say(pick(lang, "Move this slider and watch the result change.", "拖动这个滑块，观察结果的变化。")))
        if variables:
            v = variables[0]
            high = v.get("max") if isinstance(v.get("max"), (int, float)) else None
            if high is not None:
                items.append(_act("widget_setState", state={text_of(v["name"]): high},
                                  content=pick(lang, "Set to the maximum", "调到最大值")))  # fmt: skip
    elif kind == "diagram":
        nxt = _selector(selectors, "next")
        if nxt:
            items.append(_act("widget_highlight", target=nxt, content=pick(lang, "Reveal one step", "逐步展开")))
        items.append(_act("widget_setState", state={"revealed": 2}, content=pick(lang, "Two steps shown", "展开两步")))
        items.append(_say(pick(lang, "Here are the first two steps. Predict the next one before you reveal it.",
                               "这里展示了前两步。先预测下一步，再把它展开。")))  # fmt: skip
    else:
        button = _selector(selectors, "true-btn", "btn")
        if button:
            items.append(_act("widget_highlight", target=button, content=pick(lang, "Answer here", "在这里作答")))
        items.append(_say(pick(lang, "Decide whether each statement is true or false; every correct answer scores "
                                     "ten points.", "判断每个说法是否正确，答对一题得十分。")))  # fmt: skip
    result = _selector(selectors, "result-display")
    if result:
        items.append(_act("widget_annotation", target=result,
                          content=pick(lang, "Watch this value", "注意这个数值")))  # fmt: skip
    reveal = _selector(selectors, "insight-card", "step-3", "node-3", "final-card")
    if reveal:
        items.append(_act("widget_reveal", target=reveal))
    items.append(_say(pick(lang, "Try a few changes on your own, and press Reset whenever you want to start over.",
                           "自己多试几次吧，想重新开始时按“重置”即可。")))  # fmt: skip
    return items


def actions(brief: dict[str, Any]) -> list[dict[str, Any]]:
    """The action list for an ``actions`` brief."""
    lang = course_language(brief)
    kind = text_of(brief.get("sceneType"), text_of(scene_of(brief).get("type"), "slide"))
    if kind == "quiz":
        return _quiz(brief, lang)
    if kind == "interactive":
        return _interactive(brief, lang)
    return _slide(brief, lang)
