"""The outline answer: ``{languageDirective, courseTitle, outlines}`` for an ``outline`` brief.

Scenes come in teaching order: an overview, the key ideas, then some of (steps or a timeline, the formula, the
numbers or a comparison, examples, common mistakes), an interactive exploration when asked for, a quiz on what
was taught, and a summary. A subject the demo knows (``subjects``, ``knowledge``) fills the points with its own
facts, steps, examples and misconceptions. The audience sets the length and the quiz. Every phrase names the
topic only as an object ("Key Ideas of Binary Numbers", "Common Mistakes About …"), never as the subject of a
verb.
"""

from __future__ import annotations

import re
from typing import Any

from openmaic.models.demo_course import language as lang_
from openmaic.models.demo_course.brief import seed, text_of
from openmaic.models.demo_course.knowledge import field_of, find_model, lower_label, worked_example
from openmaic.models.demo_course.language import EN, ZH, pick
from openmaic.models.demo_course.subjects import find_subject, pick_lang
from openmaic.models.demo_course.topic import capital, title_case, topic_of, topic_phrase

_INTERACTIVE_WORDS = re.compile(
    r"\binteractive\b|hands[- ]on|try it|simulat|experiment|play with|互动|交互|动手|模拟|实验|探索", re.I
)


def wants_interactive(brief: dict[str, Any]) -> bool:
    """Whether the course gets an interactive scene: the brief's flag, or a requirement that asks for one."""
    return brief.get("interactive") is True or bool(_INTERACTIVE_WORDS.search(text_of(brief.get("requirement"))))


def course_topic(brief: dict[str, Any], lang: str) -> str:
    """The topic of the course (never empty)."""
    topic = topic_of(text_of(brief.get("requirement")))
    return topic or pick(lang, "this subject", "这个主题")


def course_title(lang: str, topic: str) -> str:
    """A course title of at most 30 characters."""
    if lang == ZH:
        title = f"{topic}入门" if len(topic) <= 10 else topic
        return title[:30]
    t = title_case(topic)
    for candidate in (f"{t}: The Essentials", f"{t} Essentials", t):
        if len(candidate) <= 30:
            return candidate
    return t[:30].rstrip()


# Each role: (EN title, ZH title, EN description, ZH description, EN points, ZH points); {t} is the topic as it
# reads inside a sentence ("the French Revolution"), {T} the same in title case, {B} the bare topic in title case
# for titles that start with it, {a} the audience.
_ROLES: dict[str, tuple[str, str, str, str, list[str], list[str]]] = {
    "intro": (
        "{B}: An Overview", "认识{t}",
        "Set the scene for {a}: the big question behind {t} and the route through this course.",
        "为{a}引入{t}：它要回答什么问题，以及本课程的学习路线。",
        ["The big question behind {t}", "Everyday places to spot {t}", "The route through this course"],
        ["{t}要解决的核心问题", "生活中哪里能看到{t}", "本课程的学习路线"],
    ),
    "ideas": (
        "Key Ideas of {T}", "{t}的核心概念",
        "Name the core ideas of {t} and show how they connect.",
        "梳理{t}的核心概念，并说明它们之间的联系。",
        ["The core vocabulary of {t}", "The basic building blocks", "How the building blocks fit together"],
        ["{t}的基本术语", "最基础的组成部分", "各部分之间如何配合"],
    ),
    "steps": (
        "{B}, Step by Step", "{t}的过程与步骤",
        "Walk through the process behind {t} one step at a time.",
        "一步一步拆解{t}背后的过程。",
        ["Step 1: the starting point and its inputs", "Step 2: the central change",
         "Step 3: the outcome", "Step 4: checking the result"],
        ["第一步：起点与输入", "第二步：核心变化", "第三步：得到结果", "第四步：检验结果"],
    ),
    "timeline": (
        "{B}: A Timeline", "{t}的时间线",
        "Place the main events of {t} in order and see how each led to the next.",
        "按时间顺序梳理{t}的主要事件，看清前因后果。",
        ["Origins and early causes", "The turning point", "Later developments", "The legacy today"],
        ["起源与早期原因", "关键转折点", "后续发展", "今天的影响"],
    ),
    "formula": (
        "The Formula Behind {T}", "{t}的核心公式",
        "Read the central formula of {t} symbol by symbol and use it once with real numbers.",
        "逐个符号读懂{t}的核心公式，并用真实数据算一次。",
        ["The formula in one line", "What each symbol stands for", "A worked example with real numbers"],
        ["一行公式概括核心关系", "每个符号代表什么", "用真实数据算一个例子"],
    ),
    "chart": (
        "{B} in Numbers", "用数据看{t}",
        "See how the result changes as one quantity grows, and read the trend from a chart.",
        "观察一个量变化时结果如何变化，并从图表中读出趋势。",
        ["[Chart] {result} as {var} changes", "Reading the trend", "What the numbers tell us"],
        ["[Chart] {var}变化时{result}的变化", "读懂图中的趋势", "数据告诉我们什么"],
    ),
    "table": (
        "Comparing the Parts of {T}", "{t}的要点对比",
        "Put the main parts of {t} side by side to see what sets each apart.",
        "把{t}的主要部分并排比较，看清各自的特点。",
        ["[Table] The main parts of {t} side by side", "Similarities and differences", "When each part matters"],
        ["[Table] {t}主要部分的对比", "相同点与不同点", "各部分在什么情况下最重要"],
    ),
    "examples": (
        "{B} in Everyday Life", "生活中的{t}",
        "Connect {t} to situations {a} meet outside the classroom.",
        "把{t}和{a}在课堂外遇到的情境联系起来。",
        ["An example from daily life", "An example from work or study", "A surprising use of {t}"],
        ["一个日常生活中的例子", "一个学习或工作中的例子", "{t}的一个意想不到的用途"],
    ),
    "mistakes": (
        "Common Mistakes About {T}", "关于{t}的常见误区",
        "Spot the usual misunderstandings of {t} and replace them with the correct picture.",
        "找出对{t}的常见误解，并用正确的理解取而代之。",
        ["A tempting but wrong idea", "Why the idea fails", "A better way to think about it"],
        ["一个看似合理的错误想法", "这个想法错在哪里", "更好的思考方式"],
    ),
    "interactive": (
        "Explore {T} Yourself", "动手探索{t}",
        "Change the inputs yourself, predict first, then check what happens.",
        "亲手调整输入，先预测，再验证结果。",
        ["Predict before you change anything", "Change one thing at a time", "Explain what you observe"],
        ["先预测，再动手", "每次只改变一个量", "用自己的话解释看到的现象"],
    ),
    "quiz": (
        "Quiz: {T}", "{t}小测验",
        "Check the key ideas of {t} with a few questions.",
        "用几道题检验对{t}核心概念的掌握。",
        [], [],
    ),
    "summary": (
        "{B}: Summary and Next Steps", "{t}：总结与下一步",
        "Pull the ideas of {t} together and choose what to practise next.",
        "把{t}的要点串联起来，并确定接下来的练习方向。",
        ["The key ideas in one line each", "How the ideas connect", "Next steps for practising {t}"],
        ["每个要点的一句话总结", "要点之间的联系", "接下来如何练习{t}"],
    ),
}

# What a learner does in a widget that has no inputs to change: (EN, ZH) description and key points.
_WIDGET_TEXT = {
    "diagram": (
        ("Reveal the sequence one step at a time and predict each next step before you see it.",
         ["Predict the next step first", "Reveal one step at a time", "Explain how each step leads to the next"]),
        ("逐步展开整个过程，每次展开前先预测下一步。", ["先预测下一步", "每次只展开一步", "说明每一步如何引出下一步"]),
    ),
    "game": (
        ("Test yourself in a quick true-or-false game and aim for a full score.",
         ["Read each statement carefully", "Decide true or false", "Learn from every mistake"]),
        ("通过快速判断对错的小游戏检验自己，争取拿满分。", ["仔细阅读每个说法", "判断对错", "从每次错误中学习"]),
    ),
}  # fmt: skip

# Titles pitched at an audience, where the general one would sound wrong for it: (EN, ZH).
_AUDIENCE_TITLES = {
    (lang_.CHILDREN, "intro"): ("Meet {B}!", "一起来认识{t}"),
    (lang_.CHILDREN, "ideas"): ("The Big Ideas of {T}", "{t}的大秘密"),
    (lang_.CHILDREN, "quiz"): ("Quick Quiz: {T}", "{t}小挑战"),
    (lang_.CHILDREN, "summary"): ("{B}: What We Learned", "{t}：我们学到了什么"),
    (lang_.UNIVERSITY, "ideas"): ("Core Concepts of {T}", "{t}的核心原理"),
    (lang_.PROFESSIONAL, "examples"): ("{B} at Work", "工作中的{t}"),
    (lang_.PROFESSIONAL, "summary"): ("{B}: Takeaways for Practice", "{t}：实践要点"),
}

_LENGTH = {
    lang_.CHILDREN: (5, 6), lang_.SCHOOL: (5, 7), lang_.UNIVERSITY: (6, 8), lang_.PROFESSIONAL: (6, 8),
    lang_.GENERAL: (5, 8),
}
_DIFFICULTY = {lang_.CHILDREN: "easy", lang_.SCHOOL: "medium", lang_.UNIVERSITY: "medium",
               lang_.PROFESSIONAL: "hard", lang_.GENERAL: "medium"}  # fmt: skip
_QUESTIONS = {lang_.CHILDREN: 3, lang_.SCHOOL: 4, lang_.UNIVERSITY: 4, lang_.PROFESSIONAL: 5, lang_.GENERAL: 4}


def _fill(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), text)


def _roles(brief: dict[str, Any], topic: str, who: str, interactive: bool) -> list[str]:
    requirement = text_of(brief.get("requirement"))
    model = find_model(topic, requirement)
    field = field_of(topic, requirement)
    low, high = _LENGTH[who]
    n = low + seed("length", requirement) % (high - low + 1)
    flow = "timeline" if field == "history" else "steps"
    middle = ["formula", "chart", flow] if model is not None else [flow, "table"]
    middle += ["examples", "mistakes"]
    fixed = ["intro", "ideas", "quiz", "summary"] + (["interactive"] if interactive else [])
    take = max(0, min(len(middle), n - len(fixed)))
    if interactive and take == 0:
        take = 1
    chosen = middle[:take]
    return ["intro", "ideas", *chosen, *(["interactive"] if interactive else []), "quiz", "summary"]


def _widget(lang: str, topic: str, requirement: str, points: list[str]) -> tuple[str, dict[str, Any]]:
    model = find_model(topic, requirement)
    field = field_of(topic, requirement)
    if model is not None:
        return "simulation", {
            "concept": topic,
            "keyVariables": [v.name for v in model.variables],
        }
    if field in ("science", "history", "computing", "math"):
        nodes = [{"id": f"n{i + 1}", "label": re.sub(r"^(?:Step \d+: |第.步：)", "", p)} for i, p in enumerate(points)]
        return "diagram", {"diagramType": "flowchart", "nodeCount": len(nodes), "nodes": nodes}
    return "game", {
        "gameType": "quiz",
        "challenge": pick(lang, f"Answer quick questions about {topic} to score points",
                          f"快速回答关于{topic}的问题来得分"),
        "playerControls": pick(lang, "Click an answer", "点击选择答案"),
    }


def _media(lang: str, topic: str, kind: str, n: int) -> dict[str, Any]:
    if kind == "image":
        prompt = pick(
            lang,
            f"A clear, friendly educational illustration of {topic}, showing its main parts, flat colours, no text",
            f"一幅清晰友好的教学插图，展示{topic}的主要组成部分，扁平配色，画面中没有文字",
        )
        return {"type": "image", "prompt": prompt, "elementId": f"gen_img_{n}", "aspectRatio": "16:9"}
    prompt = pick(
        lang,
        f"A short animated explainer of {topic}, one process shown step by step, calm pacing",
        f"一段简短的动画讲解，逐步展示{topic}的过程，节奏平缓",
    )
    return {"type": "video", "prompt": prompt, "elementId": f"gen_vid_{n}", "aspectRatio": "16:9"}


def outline(brief: dict[str, Any]) -> dict[str, Any]:
    """The outline answer for an ``outline`` brief."""
    lang = lang_.course_language(brief)
    requirement = text_of(brief.get("requirement"))
    who = lang_.audience(requirement, brief.get("learnerProfile"))
    topic = course_topic(brief, lang)
    interactive = wants_interactive(brief)
    model = find_model(topic, requirement)
    subject = find_subject(topic, requirement)
    phrase = topic_phrase(requirement) if lang == EN and topic_of(requirement) else topic
    values = {
        "t": phrase,
        "T": ("the " + title_case(topic) if phrase.startswith("the ") else title_case(topic)) if lang == EN else topic,
        "B": title_case(topic) if lang == EN else topic,
        "a": lang_.audience_name(lang, who),
        "result": (model.result[1] if lang == ZH else lower_label(model.result[0])) if model else "",
        "var": (model.variables[0].label[1] if lang == ZH else lower_label(model.variables[0].label[0])) if model else "",
    }
    roles = _roles(brief, topic, who, interactive)
    outlines: list[dict[str, Any]] = []
    taught: list[str] = []
    known: list[str] = []  # what the subject's own facts taught (preferred by the quiz and the summary)
    for i, role in enumerate(roles):
        en_title, zh_title, en_desc, zh_desc, en_points, zh_points = _ROLES[role]
        points = [_fill(p, values) for p in (zh_points if lang == ZH else en_points)]
        if role == "ideas" and subject is not None and subject.ideas:
            points = pick_lang(subject.ideas, lang == ZH)
        elif role == "ideas" and model is not None:
            points = [f[1] if lang == ZH else f[0] for f in model.facts]
        if subject is not None and role in ("steps", "timeline"):
            points = pick_lang(subject.steps, lang == ZH)
        ideas_table = subject is not None and role == "table" and bool(subject.ideas and subject.examples)
        if ideas_table:
            points = [pick(lang, f"[Table] Each key idea of {phrase} with an example",
                           f"[Table] {topic}的核心概念与例子"),
                      pick(lang, "Read the table row by row", "逐行阅读表格"),
                      pick(lang, "Add an example of your own", "补充一个你自己的例子")]  # fmt: skip
        if subject is not None and role == "examples":
            points = pick_lang(subject.examples, lang == ZH)
        if subject is not None and role == "mistakes":
            myth, fact = pick(lang, "Myth: ", "误区："), pick(lang, "In fact: ", "事实：")
            points = [myth + m for m in pick_lang(subject.myths, lang == ZH)]
            points += [fact + f for f in pick_lang(subject.facts, lang == ZH)]
        if role == "formula" and model is not None:
            points = [pick(lang, f"The formula: {model.plain}", f"公式：{model.plain}"), points[1],
                      worked_example(model, lang)]
        if role == "quiz":
            points = _quiz_points(known if len(known) >= 3 else taught, lang, values)
        if role == "summary" and len(known if len(known) >= 3 else taught) >= 2:
            points = (known if len(known) >= 3 else taught)[:3] + [points[-1]]
        if lang == EN:
            points = [capital(p) for p in points]
        scene: dict[str, Any] = {
            "id": f"scene_{i + 1}",
            "type": "quiz" if role == "quiz" else "interactive" if role == "interactive" else "slide",
            "title": _fill(
                ("{B}: Ideas and Examples", "{t}：概念与实例")[lang == ZH] if ideas_table
                else _AUDIENCE_TITLES.get((who, role), (en_title, zh_title))[lang == ZH],
                values,
            ),
            "description": capital(_fill(zh_desc if lang == ZH else en_desc, values)),
            "keyPoints": points,
            "order": i + 1,
        }
        if role == "quiz":
            scene["quizConfig"] = {
                "questionCount": _QUESTIONS[who],
                "difficulty": _DIFFICULTY[who],
                "questionTypes": ["single", "multiple", "short_answer"],
            }
        if role == "interactive":
            scene["widgetType"], scene["widgetOutline"] = _widget(lang, phrase, requirement, taught[-4:] or points)
            if scene["widgetType"] != "simulation":
                scene["description"], scene["keyPoints"] = _WIDGET_TEXT[scene["widgetType"]][lang == ZH]
        if scene["type"] == "slide" and role not in ("intro", "summary"):
            # What the quiz may ask about: statements the course taught as true (never a myth).
            true = [re.sub(r"^(?:In fact: |事实：)", "", p) for p in points
                    if not re.match(r"\[|Step \d|第.步|Myth: |误区：", p)]  # fmt: skip
            taught += true
            if (role == "ideas" and (subject is not None or model is not None)) or (role == "mistakes" and subject):
                known += true
        outlines.append(scene)
    _attach_media(brief, lang, topic, roles, outlines)
    return {
        "languageDirective": lang_.directive(lang, who),
        "courseTitle": course_title(lang, topic),
        "outlines": outlines,
    }


def _quiz_points(taught: list[str], lang: str, values: dict[str, str]) -> list[str]:
    picked = taught[:2] + taught[-2:] if len(taught) > 4 else list(taught)
    picked = list(dict.fromkeys(picked))
    while len(picked) < 3:
        picked.append(_fill(pick(lang, "The key ideas of {t}", "{t}的核心概念"), values)
                      if not picked else pick(lang, "Applying the ideas to a new case", "把所学用到新的情境中"))
    return picked[:5]


def _attach_media(brief: dict[str, Any], lang: str, topic: str, roles: list[str], outlines: list[dict[str, Any]]) -> None:
    """One or two slides get a generated picture or video, when the brief turns generation on."""
    slides = {role: outlines[i] for i, role in enumerate(roles) if outlines[i]["type"] == "slide"}
    if brief.get("imageGeneration") is True:
        slides["ideas"]["mediaGenerations"] = [_media(lang, topic, "image", 1)]
        second = slides.get("examples")
        if second is not None and brief.get("videoGeneration") is not True:
            second["mediaGenerations"] = [_media(lang, topic, "image", 2)]
    if brief.get("videoGeneration") is True:
        # A slide shows one generated medium: the video goes where no picture is.
        free = [slides[r] for r in ("examples", "steps", "timeline", "mistakes", "table", "chart", "formula", "ideas")
                if r in slides and not slides[r].get("mediaGenerations")]
        (free[0] if free else slides["intro"]).setdefault("mediaGenerations", []).append(_media(lang, topic, "video", 1))
