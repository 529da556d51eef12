"""The demo provider's course writer: a small, coherent course built from the requirement alone.

Everything is a pure function of the prompt text, so the same requirement always gives the same course.
The prompt is read loosely: ``Key: value`` lines (``Requirement:``, ``Title:``, ``Goal:``, ``Kind:``,
``Key points:`` separated by ``;``) and JSON objects anywhere in the text (top-level keys, or under ``scene`` /
``item``), lines taking precedence; without a ``Requirement:`` the whole text is the requirement. Scene
actions use the bullets / questions and the agent roster (``agents``) found in any JSON object of the prompt.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from typing import Any

from openmaic.courses.schema import (
    AgentProfile,
    AgentRoster,
    Interactive,
    MediaRequest,
    Outline,
    OutlineItem,
    Quiz,
    QuizQuestion,
    SceneAction,
    SceneActions,
    SceneContent,
    Slide,
)

_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z _-]{0,30}?)\s*:\s*(.+?)\s*$")
_NESTED = ("scene", "item", "outline_item", "current_scene")
_ALIASES = {
    "title": ("title", "scene_title"),
    "goal": ("goal", "scene_goal"),
    "kind": ("kind", "scene_kind", "type"),
    "key_points": ("key_points", "keypoints", "points"),
}
_MARKER = re.compile(
    r"\b(?:about|covering|regarding|on|introduction to|intro to|basics of|fundamentals of)\s+", re.I
)
_LEAD = re.compile(
    r"^(?:(?:please|create|make|build|generate|design|write|give me|i want|i'd like|i would like|teach me|teach|"
    r"explain|help me understand|help me learn|learn|prepare)\b[\s,]*)+",
    re.I,
)
_CUT = re.compile(r"\s+(?:for|with|so that|aimed at|targeting|suitable for|in \d+)\b|[.,;:!?\n()\[\]{}\"]", re.I)
_ARTICLE = re.compile(r"^(?:the|a|an|some)\s+", re.I)
_SMALL = frozenset({"a", "an", "and", "as", "at", "by", "for", "in", "of", "on", "or", "the", "to", "vs", "with"})


def seed(*parts: str) -> int:
    """A stable 64-bit number from text (never Python's salted ``hash``)."""
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


def _json_objects(text: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    i = text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        i = text.find("{", end)
    return found


def read_prompt(text: str) -> dict[str, Any]:
    """The fields of a prompt (see the module docstring), keys lower-cased with underscores."""
    fields: dict[str, Any] = {}
    objects = _json_objects(text)
    # Precedence, lowest first: top-level keys (the first object that has one wins, so a course outline
    # further down cannot rename the scene), then keys of a nested scene object, then "Key: value" lines.
    for obj in objects:
        for k, v in obj.items():
            if k not in _NESTED:
                fields.setdefault(str(k).lower(), v)
    for obj in objects:
        for nested in _NESTED:
            if isinstance(obj.get(nested), dict):
                fields.update({str(k).lower(): v for k, v in obj[nested].items()})
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            fields[re.sub(r"[\s-]+", "_", m.group(1).strip().lower())] = m.group(2)
    for name, aliases in _ALIASES.items():
        for alias in aliases:
            if fields.get(alias) not in (None, "", []):
                fields[name] = fields[alias]
                break
    fields["_explicit_requirement"] = bool(str(fields.get("requirement") or "").strip())
    if not fields["_explicit_requirement"]:
        fields["requirement"] = text.strip()
    fields["_objects"] = objects
    return fields


def topic_of(requirement: str) -> str:
    """The subject of a requirement, as written ("photosynthesis", "the French Revolution" → "French Revolution")."""
    text = " ".join(str(requirement).split())
    m = _MARKER.search(text)
    if m:
        text = text[m.end() :]
    else:
        text = _LEAD.sub("", text)
        text = re.sub(
            r"^(?:(?:a|an|the|short|brief|quick|small|simple|beginners?'?|introductory|full|mini|interactive)\s+)*"
            r"(?:course|class|lesson|lecture|tutorial|overview|primer|classroom|unit|module|guide)s?\s+"
            r"(?:of|for|to)?\s*",
            "",
            text,
            flags=re.I,
        )
    text = _CUT.split(text, maxsplit=1)[0]
    text = _ARTICLE.sub("", text.strip())
    words = text.split()[:6]
    return " ".join(words) if words else "the topic"


def title_case(text: str) -> str:
    """Title case that keeps acronyms and small words ("intro to SQL joins" → "Intro to SQL Joins")."""
    out = []
    for i, w in enumerate(text.split()):
        if w != w.lower():
            out.append(w)
        elif i and w in _SMALL:
            out.append(w)
        else:
            out.append(w[:1].upper() + w[1:])
    return " ".join(out)


def _lower_first(text: str) -> str:
    first = text.split(" ", 1)[0]
    if len(first) > 1 and first.isupper():  # an acronym stays as it is
        return text
    return text[:1].lower() + text[1:]


def _strings(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    if isinstance(value, str) and value.strip():
        return [p.strip() for p in re.split(r"[;|]", value) if p.strip()]
    return []


def wants_interactive(fields: dict[str, Any]) -> bool:
    """Whether the prompt asks for an interactive scene."""
    flag = fields.get("interactive")
    if isinstance(flag, bool):
        return flag
    if isinstance(flag, str):
        return flag.strip().lower() in ("yes", "true", "1", "on")
    return bool(re.search(r"\b(?:interactive|hands-on|try it)\b", str(fields.get("requirement", "")), re.I))


def outline(fields: dict[str, Any]) -> Outline:
    """An outline of 4–8 scenes: introduction, key ideas, a few middle scenes, a quiz, maybe an exercise, a summary."""
    requirement = str(fields.get("requirement", ""))
    topic = topic_of(requirement)
    t = title_case(topic)
    interactive = wants_interactive(fields)
    n = 4 + seed("outline", requirement) % 5
    if interactive:
        n = max(n, 5)
    middle = [
        OutlineItem(
            title="Worked example",
            goal=f"Follow one complete example of {topic}, step by step.",
            key_points=["Set up the problem", "Apply the key ideas one step at a time", "Check the result"],
        ),
        OutlineItem(
            title=f"How {t} works",
            goal=f"Understand the mechanism behind {topic}.",
            key_points=[f"The parts of {topic}", "How the parts interact", "What changes the outcome"],
        ),
        OutlineItem(
            title=f"Common misconceptions about {t}",
            goal=f"Spot and correct the usual mistakes people make with {topic}.",
            key_points=["A tempting but wrong idea", "Why it fails", "The correct way to think about it"],
        ),
        OutlineItem(
            title=f"{t} in the real world",
            goal=f"Connect {topic} to situations you meet outside the classroom.",
            key_points=["An everyday example", "A professional use", "Where to look next"],
        ),
    ]
    items = [
        OutlineItem(
            title=f"Introduction to {t}",
            goal=f"See what {topic} is, where it shows up, and why it is worth learning.",
            key_points=[f"What {topic} means", f"Where {topic} appears", "What this course covers"],
            media=[MediaRequest(kind="image", element_id="gen_img_1", prompt=f"{t}: an illustrated overview")],
        ),
        OutlineItem(
            title=f"Key ideas of {t}",
            goal=f"Name and explain the core ideas behind {topic}.",
            key_points=[f"The vocabulary of {topic}", "The ideas everything else builds on", "How the ideas connect"],
            media=[MediaRequest(kind="video", element_id="gen_vid_1", prompt=f"{t}: the key ideas in motion")],
        ),
        *middle[: n - 4 - interactive],
        OutlineItem(
            title="Check your understanding",
            goal=f"Test your grasp of the key ideas of {topic}.",
            kind="quiz",
            key_points=["Core definitions", "Applying the ideas", "Avoiding common mistakes"],
        ),
    ]
    if interactive:
        items.append(
            OutlineItem(
                title="Try it yourself",
                goal=f"Practise {topic} hands-on with a short interactive exercise.",
                kind="interactive",
                key_points=["Predict before you reveal", "Explain each idea in your own words"],
            )
        )
    items.append(
        OutlineItem(
            title="Summary",
            goal=f"Review what you learned about {topic} and where to go next.",
            key_points=["The key ideas in one line each", "What to practise next"],
        )
    )
    return Outline(title=f"{t}: The Essentials", items=items)


_BULLETS = [
    "What {s} means, in plain words",
    "The parts of {s} and how they fit together",
    "A step-by-step look at {s}",
    "A common mistake with {s}, and how to avoid it",
    "How {s} connects to what you already know",
    "Where you will meet {s} outside this course",
]


def _scene(fields: dict[str, Any]) -> tuple[str, str, str, list[str], str]:
    title = str(fields.get("title") or "").strip() or "This scene"
    goal = str(fields.get("goal") or "").strip()
    kind = str(fields.get("kind") or "").strip().lower()
    if kind not in ("slide", "quiz", "interactive"):
        low = title.lower()
        kind = "quiz" if ("quiz" in low or "check your" in low) else "interactive" if "try it" in low else "slide"
    # Without the course's requirement the scene title is the best subject there is.
    source = str(fields["requirement"]) if fields.get("_explicit_requirement") else title
    subject = topic_of(source)
    return title, goal, kind, _strings(fields.get("key_points")), subject


def slide(fields: dict[str, Any]) -> Slide:
    """A slide with 3–5 bullets: the scene's key points first, then general angles on its subject."""
    title, goal, _, points, subject = _scene(fields)
    s = seed("slide", title, goal)
    count = 3 + s % 3
    bullets = points[:count]
    start = s % len(_BULLETS)
    for i in range(len(_BULLETS)):
        if len(bullets) >= count:
            break
        bullet = _BULLETS[(start + i) % len(_BULLETS)].format(s=subject)
        if not any(b.lower().split()[:3] == bullet.lower().split()[:3] for b in bullets):
            bullets.append(bullet)
    notes = (goal + " " if goal else "") + "Walk through each bullet with a concrete example, then invite questions."
    return Slide(title=title, bullets=bullets, notes=notes)


def _question(question: str, right: str, wrong: list[str], explanation: str, pick: int) -> QuizQuestion:
    answer = pick % 4
    options = wrong[:answer] + [right] + wrong[answer:3]
    return QuizQuestion(question=question, options=options, answer=answer, explanation=explanation)


def quiz(fields: dict[str, Any]) -> Quiz:
    """Three four-option questions about the scene's subject, answer positions varied but fixed."""
    title, goal, _, points, subject = _scene(fields)
    s = seed("quiz", title, goal)
    # Prefer what the course taught (an outline in the prompt) over the quiz scene's own key points.
    items = _find(fields["_objects"], "items")
    taught = [
        p
        for it in (items if isinstance(items, list) else [])
        if isinstance(it, dict) and it.get("kind", "slide") == "slide"
        for p in _strings(it.get("key_points"))
    ]
    pool = taught or points
    point = pool[(s >> 24) % len(pool)] if pool else f"The core idea of {subject}"
    questions = [
        _question(
            f"Which statement best describes what {subject} is about?",
            f"Understanding and applying the core ideas of {subject}",
            [
                "Memorising definitions without ever using them",
                "A niche detail that only experts need",
                "Something unrelated to everyday problems",
            ],
            "The goal is understanding you can use, not facts in isolation.",
            s,
        ),
        _question(
            f"Which of these is a key point of {subject}?",
            point,
            [
                "Nothing about it ever changes, so practice is pointless",
                "It only applies in one very unusual situation",
                "It was disproved long ago",
            ],
            f"“{point}” is one of the key points covered in this course.",
            s >> 8,
        ),
        _question(
            f"What is the best way to check that you really understand {subject}?",
            "Explain it in your own words and apply it to a new example",
            [
                "Re-read the slides until they feel familiar",
                "Memorise the bullet points word for word",
                "Move on and hope it comes up again",
            ],
            "Explaining and applying an idea shows understanding; familiarity does not.",
            s >> 16,
        ),
    ]
    return Quiz(title=title, questions=questions)


def interactive(fields: dict[str, Any]) -> Interactive:
    """A self-contained page of flip cards, one per key point, with a progress counter."""
    title, goal, _, points, subject = _scene(fields)
    points = points or [b.format(s=subject) for b in _BULLETS[:3]]
    cards = "\n".join(
        f'<button class="card" onclick="flip(this)"><span class="q">Idea {i + 1}: what do you think it is?</span>'
        f'<span class="a">{html.escape(p)}</span></button>'
        for i, p in enumerate(points)
    )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2rem;max-width:40rem}}
.card{{display:block;width:100%;margin:.5rem 0;padding:1rem;border:1px solid #888;border-radius:.5rem;background:#f6f6f6;text-align:left;font-size:1rem;cursor:pointer}}
.card .a{{display:none}}.card.open .a{{display:inline}}.card.open .q{{display:none}}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{html.escape(goal or "Think about each idea, then flip its card.")}</p>
{cards}
<p id="progress">0 of {len(points)} revealed</p>
<script>
let seen = 0;
function flip(el) {{
  if (!el.classList.contains("open")) {{ el.classList.add("open"); seen += 1; }}
  document.getElementById("progress").textContent = seen + " of {len(points)} revealed";
}}
</script>
</body></html>"""
    instructions = "Before flipping each card, say what you think the idea is; then flip it and compare."
    return Interactive(title=title, html=page, instructions=instructions)


def scene_content(fields: dict[str, Any]) -> SceneContent:
    """The content of the scene the prompt describes, of its kind."""
    kind = _scene(fields)[2]
    if kind == "quiz":
        return SceneContent(kind="quiz", quiz=quiz(fields))
    if kind == "interactive":
        return SceneContent(kind="interactive", interactive=interactive(fields))
    return SceneContent(kind="slide", slide=slide(fields))


def _find(value: Any, key: str) -> Any:
    """The first value under ``key`` anywhere in a JSON document (depth first)."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            found = _find(v, key)
            if found is not None:
                return found
    return None


def _agent_ids(fields: dict[str, Any]) -> dict[str, str]:
    """Agent id per role: from a roster in the prompt, else the demo roster's ids."""
    agents = _find(fields["_objects"], "agents")
    agents = [a for a in agents if isinstance(a, dict) and a.get("id")] if isinstance(agents, list) else []
    if not agents:
        return {"teacher": "teacher", "assistant": "assistant", "classmate": "classmate_1"}
    ids = {"teacher": "", "assistant": "", "classmate": ""}
    for a in agents:
        if a.get("role") in ids and not ids[a["role"]]:
            ids[a["role"]] = str(a["id"])
    ids["teacher"] = ids["teacher"] or str(agents[0]["id"])
    return ids


def scene_actions(fields: dict[str, Any]) -> SceneActions:
    """The teacher presents the scene point by point, a classmate asks, the assistant recaps."""
    title, goal, kind, points, subject = _scene(fields)
    ids = _agent_ids(fields)
    teacher, assistant, classmate = ids["teacher"], ids["assistant"], ids["classmate"]
    bullets = _strings(_find(fields["_objects"], "bullets")) or points or [b.format(s=subject) for b in _BULLETS[:3]]
    acts = [SceneAction(kind="speech", agent_id=teacher, text=f"Let's look at {title}. {goal}".strip())]
    if kind == "quiz":
        questions = _find(fields["_objects"], "questions")
        count = len(questions) if isinstance(questions, list) and questions else 3
        acts.append(SceneAction(kind="speech", agent_id=teacher, text=f"Here are {count} questions. Take your time."))
        acts.append(SceneAction(kind="pause", agent_id=teacher, text="Answer the questions, then we will discuss."))
    elif kind == "interactive":
        acts.append(SceneAction(kind="speech", agent_id=teacher, text="Try the exercise: predict each idea first."))
        acts.append(SceneAction(kind="pause", agent_id=teacher, text="Work through the exercise."))
    else:
        shown = bullets[:5]
        for i, bullet in enumerate(shown):
            word = "Finally" if i and i == len(shown) - 1 else ["First", "Next", "Then", "Also"][min(i, 3)]
            acts.append(SceneAction(kind="highlight", agent_id=teacher, text=bullet))
            acts.append(SceneAction(kind="speech", agent_id=teacher, text=f"{word}: {_lower_first(bullet)}."))
    if classmate:
        acts.append(SceneAction(kind="ask", agent_id=classmate, text=f"Could you give an example of {subject}?"))
        acts.append(
            SceneAction(
                kind="speech",
                agent_id=teacher,
                text="Good question! Take one simple case and apply each point in order; that is the habit to build.",
            )
        )
    if assistant:
        recap = "; ".join(_lower_first(b) for b in bullets[:3])
        acts.append(SceneAction(kind="speech", agent_id=assistant, text=f"To recap: {recap}."))
    return SceneActions(actions=acts)


_TEACHERS = ["Dr. Ada Rivera", "Prof. Kenji Sato", "Ms. Amara Okafor", "Mr. Lukas Berg"]
_ASSISTANTS = ["Sam", "Priya", "Noah", "Lina"]
_CLASSMATES = [
    ("Mia", "curious and quick to ask for concrete examples"),
    ("Leo", "a friendly sceptic who likes to test every claim"),
    ("Zoe", "quiet and careful; she summarises what she heard"),
    ("Omar", "enthusiastic and always links ideas to everyday life"),
]


def roster(fields: dict[str, Any]) -> AgentRoster:
    """A teacher, an assistant and one or two classmates, chosen from the requirement."""
    topic = topic_of(str(fields.get("requirement", "")))
    s = seed("agents", str(fields.get("requirement", "")))
    agents = [
        AgentProfile(
            id="teacher",
            name=_TEACHERS[s % 4],
            role="teacher",
            persona=f"A patient teacher who explains {topic} with clear steps and concrete examples.",
        ),
        AgentProfile(
            id="assistant",
            name=_ASSISTANTS[(s >> 4) % 4],
            role="assistant",
            persona="A teaching assistant who recaps each scene and answers follow-up questions.",
        ),
    ]
    for i in range(1 + (s >> 8) % 2):
        name, persona = _CLASSMATES[((s >> 12) + i) % 4]
        agents.append(AgentProfile(id=f"classmate_{i + 1}", name=name, role="classmate", persona=f"A classmate: {persona}."))
    return AgentRoster(agents=agents)
