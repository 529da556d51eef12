"""A whole course from the demo model's answers, built the way generation asks for it (COURSE-API §2).

Each step sends a system message and a user message ending in ``Brief (JSON):`` and the brief; each answer feeds
the next brief as the pipeline does: outline → agents → per scene the content (slide, quiz or interactive page)
then its actions. Like the pipeline, element ids are replaced with fresh ``<type>_<8 chars>`` ids and generated
media refs with unique ``gen_img_…``/``gen_vid_…`` refs before the next step sees them, so an action can only
name an element through the brief.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from openmaic.courses.format import new_id
from openmaic.models.demo_course import answer
from openmaic.models.types import SystemMessage, UserMessage

HAN = re.compile(r"[\u4e00-\u9fff]")


def ask(brief: dict[str, Any]) -> str:
    """The demo model's raw answer text to ``brief``."""
    prompt = "Follow the instructions above.\n\nBrief (JSON):\n" + json.dumps(brief, ensure_ascii=False)
    return answer([SystemMessage("You write OpenMAIC course content."), UserMessage(prompt)])


def plain(html: str) -> str:
    """Text of an HTML fragment."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def summary(el: dict[str, Any]) -> str:
    """The element summary generation gives the actions step: text, the chart type, or the formula."""
    if el["type"] == "text":
        return plain(el["content"])[:50]
    if el["type"] == "shape" and isinstance(el.get("text"), dict):
        return plain(el["text"]["content"])[:50]
    if el["type"] == "latex":
        return el["latex"][:50]
    if el["type"] == "chart":
        return el["chartType"]
    return el["type"]


def selectors(page: str) -> list[str]:
    """The selector inventory generation extracts from an interactive page: ids and data-step-id attributes."""
    ids = [i for i in re.findall(r'\bid="([^"]+)"', page) if i != "widget-config"]
    steps = re.findall(r'data-step-id="([^"]+)"', page)
    return [f"#{i}" for i in ids] + [f'[data-step-id="{s}"]' for s in steps]


@dataclass
class Scene:
    outline: dict[str, Any]
    raw_content: str
    content: Any  # slide object, question list, or the HTML page
    media: list[dict[str, Any]]
    actions_brief: dict[str, Any]
    raw_actions: str
    actions: list[dict[str, Any]]
    written_ids: list[str] = field(default_factory=list)  # the element ids the demo wrote, before replacement


@dataclass
class Course:
    requirement: str
    flags: dict[str, bool]
    raw_outline: str
    outline: dict[str, Any]
    raw_agents: str
    agents: list[dict[str, Any]]
    roster: list[dict[str, Any]]
    scenes: list[Scene] = field(default_factory=list)

    def answers(self) -> list[str]:
        """Every raw answer text of the course."""
        out = [self.raw_outline, self.raw_agents]
        for s in self.scenes:
            out += [s.raw_content, s.raw_actions]
        return out


def language_of(requirement: str) -> str:
    return "zh-CN" if HAN.search(requirement) else "en-US"


def build_course(requirement: str, *, interactive: bool = False, image: bool = False, video: bool = False) -> Course:
    """The course the demo model writes for ``requirement``."""
    common: dict[str, Any] = {"requirement": requirement, "language": language_of(requirement)}
    raw_outline = ask({**common, "step": "outline", "interactive": interactive, "imageGeneration": image,
                       "videoGeneration": video, "learnerProfile": None, "research": [], "materials": False})
    outline = json.loads(raw_outline)
    outlines = outline["outlines"]
    # The pipeline makes each generated-media id unique, the same original id mapping to the same new one.
    refs: dict[str, str] = {}
    for o in outlines:
        for m in o.get("mediaGenerations", []):
            kind = "img" if m["type"] == "image" else "vid"
            m["elementId"] = refs.setdefault(m["elementId"], new_id(f"gen_{kind}"))
    common.update(courseTitle=outline["courseTitle"], languageDirective=outline["languageDirective"])
    raw_agents = ask({**common, "step": "agents", "outlines": outlines})
    agents = json.loads(raw_agents)["agents"]
    roster = [{"id": f"gen-server-{i}", "name": a["name"], "role": a["role"]} for i, a in enumerate(agents)]
    course = Course(requirement, {"interactive": interactive, "image": image, "video": video}, raw_outline,
                    outline, raw_agents, agents, roster)  # fmt: skip
    previous = ""
    for i, o in enumerate(outlines):
        position = "first" if i == 0 else "last" if i == len(outlines) - 1 else "middle"
        media = [{"ref": m["elementId"], "type": m["type"], "prompt": m["prompt"],
                  "aspectRatio": m.get("aspectRatio", "16:9")} for m in o.get("mediaGenerations", [])]  # fmt: skip
        actions_brief: dict[str, Any] = {
            **common, "step": "actions", "sceneType": o["type"], "scene": o, "agents": roster,
            "position": position, "outlines": [x["title"] for x in outlines], "previousSpeech": previous,
        }  # fmt: skip
        if o["type"] == "slide":
            teacher = next(a for a in agents if a["role"] == "teacher")
            raw = ask({**common, "step": "slide", "scene": o, "outlines": outlines, "media": media,
                       "teacher": {"name": teacher["name"], "persona": teacher["persona"]}})  # fmt: skip
            content = json.loads(raw)
            written = [el["id"] for el in content["elements"]]
            for el in content["elements"]:  # generation replaces every element id
                el["id"] = new_id(el["type"])
            actions_brief["elements"] = [{"id": e["id"], "type": e["type"], "summary": summary(e)}
                                         for e in content["elements"]]  # fmt: skip
        elif o["type"] == "quiz":
            written = []
            raw = ask({**common, "step": "quiz", "scene": o})
            content = json.loads(raw)
            actions_brief["questions"] = content
        else:
            written = []
            raw = ask({**common, "step": "interactive", "scene": o})
            content = raw
            config = json.loads(re.search(r'id="widget-config">(.*?)</script>', raw, re.S).group(1))
            actions_brief["widget"] = {"type": o.get("widgetType"), "config": config, "selectors": selectors(raw)}
        raw_actions = ask(actions_brief)
        actions = json.loads(raw_actions)
        previous = " ".join(a["content"] for a in actions if a["type"] == "text")[-300:]
        course.scenes.append(Scene(o, raw, content, media, actions_brief, raw_actions, actions, written))
    return course


_EN_TOPICS = [
    "photosynthesis", "binary numbers", "binary search", "Ohm's law", "compound interest", "the French Revolution",
    "fractions", "Newton's second law", "the Pythagorean theorem", "SQL joins", "machine learning",
    "the water cycle", "supply and demand", "English verb tenses", "cell division", "plate tectonics",
]  # fmt: skip
_EN_AUDIENCES = ["kids", "8th graders", "high school students", "university students", "software engineers",
                 "nurses", "beginners", "college freshmen"]  # fmt: skip
_EN_FORMS = [
    "Teach {a} about {t}", "A hands-on introduction to {t} for {a}", "{T} for {a}", "Create a short course on {t}",
    "Explain how {t} works to {a}", "I want to learn {t}", "An interactive lesson about {t} for {a}",
    "Introduction to {t}", "hands-on {t} workshop for {a}", "Please make a lesson on {t} with a quiz",
]  # fmt: skip
_ZH_TOPICS = ["光合作用", "二进制", "二分查找", "欧姆定律", "复利", "法国大革命", "分数加法", "牛顿第二定律", "勾股定理",
              "水循环", "机器学习", "供求关系", "细胞分裂", "唐朝历史"]  # fmt: skip
_ZH_AUDIENCES = ["小学生", "初中生", "高中生", "大学生", "软件工程师", "零基础的人"]
_ZH_FORMS = [
    "给{a}讲解{t}", "请为{a}设计一门关于{t}的课程", "{t}入门", "我想学习{t}的基础知识", "面向{a}的{t}互动课程",
    "讲讲{t}，包含互动练习", "帮我准备一节{t}的课，给{a}", "请设计一节课，主题是{t}",
]  # fmt: skip


def random_requirements(n: int, rng: random.Random) -> list[tuple[str, bool, bool, bool]]:
    """``n`` requirements, about half Chinese, with random interactive / image / video flags."""
    out = []
    for i in range(n):
        if i % 2:
            t, a, form = rng.choice(_ZH_TOPICS), rng.choice(_ZH_AUDIENCES), rng.choice(_ZH_FORMS)
            text = form.format(t=t, a=a)
        else:
            t, a, form = rng.choice(_EN_TOPICS), rng.choice(_EN_AUDIENCES), rng.choice(_EN_FORMS)
            text = form.format(t=t, a=a, T=t[:1].upper() + t[1:])
        out.append((text, rng.random() < 0.5, rng.random() < 0.5, rng.random() < 0.4))
    return out
