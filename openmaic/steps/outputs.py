"""What a run makes of its models' answers: the outline, the roster and a scene's script, made valid, never trusted.

Each reply is parsed with repair (:func:`openmaic.courses.format.parse_json_response`: fences, prose, truncated
arrays), then normalized into the format's types, one item at a time, so one bad item is dropped rather than the
whole answer refused. What cannot be made valid raises :class:`~openmaic.models.errors.OutputInvalid` with a message
that names the problem: the step fails, is retried, and pauses the run with that message after its retries.

* **the outline** (``{languageDirective, courseTitle, outlines}``, or a bare array from older prompts): 1 to
  :data:`MAX_SCENES` scenes; each with an id, a known type (an interactive scene without a widget, a PBL scene and
  an unknown type become slides), a title (else its description's first words, else "Scene <n>"), key points,
  ``order`` renumbered; a quiz gets a ``quizConfig`` (3 medium single-choice questions by default); media requests
  keep a prompt and a known type, are dropped when that generation is off, and get refs unique to the run
  (``gen_img_<8>``/``gen_vid_<8>``, the same model id always mapping to the same ref);
* **the roster** (``agents: auto``): at least two agents with exactly one teacher, else the preset agents;
* **a scene's script**: items in order; text becomes speech; everything after the first discussion is cut;
  slide-only actions leave other scenes; an interactive scene keeps speech and widget actions, a quiz speech; a
  spotlight on an element that does not exist is pointed at the first element, a laser or ``play_video`` on one
  is dropped; a discussion names a student of the roster; with no speech at all a default script stands in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic.courses import format as fmt
from openmaic.courses.lenient import drop_nulls
from openmaic.models.errors import OutputInvalid
from openmaic.steps.roster import BUILTIN_AGENTS

__all__ = [
    "MAX_SCENES", "OutlineAnswer", "agent_config", "outline_entry", "preset_roster", "read_actions", "read_agents",
    "read_outline",
]  # fmt: skip

MAX_SCENES = 30
_SCENE_TYPES = ("slide", "quiz", "interactive")
_WIDGETS = ("simulation", "diagram", "code", "game", "visualization3d")
_SLIDE_ONLY = ("spotlight", "laser", "play_video")
_WIDGET_ACTIONS = ("widget_highlight", "widget_setState", "widget_annotation", "widget_reveal")
_PRIORITY = {"teacher": 10, "assistant": 7, "student": 5}
DEFAULT_DIRECTIVE = "Teach in the language of the learner's requirement, and keep technical terms accurate."


class OutlineAnswer(msgspec.Struct, frozen=True, kw_only=True):
    language_directive: str
    course_title: str
    outlines: list[fmt.SceneOutline]


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        value = value.splitlines()
    return [t for v in value if (t := _text(v))] if isinstance(value, list) else []


def _parse(text: str, what: str) -> Any:
    data = fmt.parse_json_response(text)
    if data is None:
        raise OutputInvalid(f"the {what} reply was not JSON")
    return drop_nulls(data)


def _ref(salt: str, kind: str, given: str) -> str:
    digest = hashlib.sha256(f"{salt}\x1f{given}".encode()).hexdigest()[:8]
    return f"gen_{'img' if kind == 'image' else 'vid'}_{digest}"


def _media(raw: Any, salt: str, refs: dict[str, str], *, image: bool, video: bool) -> list[dict[str, Any]]:
    out = []
    for m in raw if isinstance(raw, list) else []:
        if not isinstance(m, dict) or m.get("type") not in ("image", "video") or not _text(m.get("prompt")):
            continue
        if (m["type"] == "image" and not image) or (m["type"] == "video" and not video):
            continue
        given = _text(m.get("elementId")) or f"{m['type']}-{len(refs) + 1}"
        if given not in refs:
            refs[given] = _ref(salt, m["type"], given)
        ratio = m.get("aspectRatio") if m.get("aspectRatio") in fmt.ASPECT_RATIOS else "16:9"
        item = {"type": m["type"], "prompt": _text(m["prompt"]), "elementId": refs[given], "aspectRatio": ratio}
        if any(o["elementId"] == item["elementId"] for o in out):
            continue
        out.append(item)
    return out


def _quiz_config(raw: Any) -> dict[str, Any]:
    raw = raw if isinstance(raw, dict) else {}
    count = raw.get("questionCount")
    types = [t if t != "text" else "short_answer" for t in raw.get("questionTypes") or [] if isinstance(t, str)]
    types = [t for t in dict.fromkeys(types) if t in ("single", "multiple", "short_answer")]
    return {
        "questionCount": max(1, min(10, int(count))) if isinstance(count, int | float) else 3,
        "difficulty": raw.get("difficulty") if raw.get("difficulty") in ("easy", "medium", "hard") else "medium",
        "questionTypes": types or ["single"],
    }


def _outline_item(raw: dict[str, Any], n: int, salt: str, refs: dict[str, str], *, image: bool,
                  video: bool) -> dict[str, Any]:
    kind = raw.get("type") if raw.get("type") in _SCENE_TYPES else "slide"
    widget = raw.get("widgetType")
    if widget == "procedural-skill":
        widget = "diagram"
    if kind == "interactive" and widget not in _WIDGETS:
        kind = "slide"  # an interactive scene with nothing to build is written as a slide
    description = _text(raw.get("description")) or _text(raw.get("goal"))
    title = _text(raw.get("title")) or " ".join(description.split()[:8]) or f"Scene {n}"
    item: dict[str, Any] = {"id": f"scene_{n}", "type": kind, "title": title[:200],
                            "description": description, "keyPoints": _strings(raw.get("keyPoints"))[:8],
                            "order": n}
    for key in ("teachingObjective", "languageNote"):
        if _text(raw.get(key)):
            item[key] = _text(raw[key])
    media = _media(raw.get("mediaGenerations"), salt, refs, image=image, video=video) if kind == "slide" else []
    if media:
        item["mediaGenerations"] = media
    if kind == "quiz":
        item["quizConfig"] = _quiz_config(raw.get("quizConfig"))
    if kind == "interactive":
        item["widgetType"] = widget
        outline = raw.get("widgetOutline")
        item["widgetOutline"] = outline if isinstance(outline, dict) else {"concept": title}
    return item


def outline_entry(raw: Any, n: int, salt: str, refs: dict[str, str], *, image: bool,
                  video: bool) -> fmt.SceneOutline | None:
    """Scene ``n`` (1-based) of an outline from one item of a model's ``outlines``; None when it is not an object.
    ``refs`` maps the model's media ids to the run's refs, shared by the items of one answer."""
    if not isinstance(raw, dict):
        return None
    item = _outline_item(drop_nulls(raw), n, salt, refs, image=image, video=video)
    try:
        return msgspec.convert(item, fmt.SceneOutline)
    except msgspec.ValidationError:
        return None


def read_outline(text: str, *, salt: str, image_generation: bool = True, video_generation: bool = True,
                 fallback_title: str = "") -> OutlineAnswer:
    """The outline a model answered (see the module doc); OutputInvalid when it holds no usable scene."""
    data = _parse(text, "outline")
    items = data if isinstance(data, list) else data.get("outlines") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise OutputInvalid("the outline reply has no \"outlines\" list")
    refs: dict[str, str] = {}
    outlines = []
    for raw in items:
        if len(outlines) >= MAX_SCENES:
            break
        item = outline_entry(raw, len(outlines) + 1, salt, refs, image=image_generation, video=video_generation)
        if item is not None:
            outlines.append(item)
    if not outlines:
        raise OutputInvalid("the outline reply has no usable scene (each needs a title or a description)")
    meta = data if isinstance(data, dict) else {}
    title = (_text(meta.get("courseTitle")) or fallback_title or outlines[0].title)[:120]
    directive = _text(meta.get("languageDirective")) or DEFAULT_DIRECTIVE
    return OutlineAnswer(language_directive=directive, course_title=title, outlines=outlines)


def agent_config(agent_id: str, name: str, role: str, persona: str, index: int,
                 students_before: int = 0) -> fmt.AgentConfig:
    avatars = {"teacher": "/avatars/teacher.png", "assistant": "/avatars/assist.png"}
    students = ("/avatars/curious.png", "/avatars/thinker.png", "/avatars/note-taker.png",
                "/avatars/curious-2.png", "/avatars/thinker-2.png", "/avatars/note-taker-2.png")
    avatar = avatars.get(role) or students[students_before % len(students)]
    return fmt.AgentConfig(id=agent_id, name=name, role=role, persona=persona, avatar=avatar,
                           color=fmt.AGENT_COLORS[index % len(fmt.AGENT_COLORS)], priority=_PRIORITY.get(role, 5))


def preset_roster(ids: Sequence[str] = ("default-1", "default-2", "default-4", "default-6")) -> list[fmt.AgentConfig]:
    """The preset agents named (the built-in teacher leads when none of them teaches)."""
    out = [BUILTIN_AGENTS[i].config() for i in ids if i in BUILTIN_AGENTS]
    if not any(a.role == "teacher" for a in out):
        out.insert(0, BUILTIN_AGENTS["default-1"].config())
    return out


def read_agents(text: str) -> list[fmt.AgentConfig] | None:
    """The roster a model cast (ids ``gen-server-<i>``), or None when it is not at least two agents with exactly
    one teacher (the caller then casts the presets)."""
    try:
        data = _parse(text, "agents")
    except OutputInvalid:
        return None
    items = data.get("agents") if isinstance(data, dict) else data if isinstance(data, list) else None
    agents = []
    students = 0
    for raw in items if isinstance(items, list) else []:
        if not isinstance(raw, dict) or not _text(raw.get("name")):
            continue
        role = raw.get("role") if raw.get("role") in ("teacher", "assistant") else "student"
        agents.append(agent_config(f"gen-server-{len(agents)}", _text(raw["name"])[:100], role,
                                   _text(raw.get("persona"))[:2000], len(agents), students))
        students += role == "student"
    if len(agents) < 2 or sum(a.role == "teacher" for a in agents) != 1:
        return None
    return agents[:12]


# -- a scene's script ------------------------------------------------------------------------------------------


def _items(text: str) -> list[Any]:
    data = fmt.parse_json_response(text)
    if isinstance(data, dict):
        data = data.get("actions") if isinstance(data.get("actions"), list) else None
    return drop_nulls(data) if isinstance(data, list) else []


def _action(raw: Any, n: int) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    if raw.get("type") == "text":
        text = _text(raw.get("content"))
        return {"type": "speech", "id": f"action_{n}", "text": text} if text else None
    name = raw.get("name") or raw.get("tool_name")
    params = raw.get("params") if isinstance(raw.get("params"), dict) else raw.get("parameters")
    if raw.get("type") not in ("action", None) and name is None:
        name, params = raw.get("type"), {k: v for k, v in raw.items() if k != "type"}
    if not isinstance(name, str) or not isinstance(params, dict):
        return None
    ident = raw.get("action_id") or raw.get("tool_id") or params.get("id") or f"action_{n}"
    return {**{k: v for k, v in params.items() if k not in ("id", "type")}, "type": name, "id": str(ident)}


def _default_script(scene: fmt.Scene, outline: fmt.SceneOutline | None, language: str) -> list[dict[str, Any]]:
    zh = language.lower().startswith("zh")
    if scene.type != "slide":
        line = {"quiz": ("Take your time with these questions; we will go through them after you submit.",
                         "请认真完成这些题目，提交后我们一起回顾。"),
                "interactive": ("Try the interactive page yourself: change a setting and watch what happens.",
                                "请亲手试一试这个互动页面：改变设置，观察会发生什么。")}.get(scene.type, ("", ""))
        return [{"type": "speech", "id": "action_1", "text": line[1] if zh else line[0] or scene.title}]
    points = list(outline.keyPoints) if outline is not None else []
    sep = "；" if zh else "; "
    text = scene.title + ("。" if zh else ". ") + sep.join(points) if points else scene.title
    out: list[dict[str, Any]] = []
    first = next((e for e in scene.content.canvas.elements if e.type == "text"), None)  # type: ignore[union-attr]
    if first is not None:
        out.append({"type": "spotlight", "id": "action_0", "elementId": first.id})
    return [*out, {"type": "speech", "id": "action_1", "text": text}]


def read_actions(text: str, scene: fmt.Scene, agents: Sequence[fmt.AgentConfig], *,
                 outline: fmt.SceneOutline | None = None, language: str = "en") -> list[fmt.Action]:
    """A scene's script from a model's reply (see the module doc); never empty."""
    elements: dict[str, Any] = {}
    if isinstance(scene.content, fmt.SlideContent):
        elements = {e.id: e for e in scene.content.canvas.elements}
    students = [a.id for a in agents if a.role == "student"] or [a.id for a in agents if a.role != "teacher"]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, raw in enumerate(_items(text), start=1):
        a = _action(raw, n)
        if a is None:
            continue
        kind = a["type"]
        if kind in _SLIDE_ONLY and scene.type != "slide":
            continue
        if scene.type == "interactive" and kind not in ("speech", *_WIDGET_ACTIONS):
            continue
        if scene.type == "quiz" and kind != "speech":
            continue
        if kind == "spotlight" and a.get("elementId") not in elements:
            if not elements:
                continue
            a["elementId"] = next(iter(elements))
        if kind == "laser" and getattr(elements.get(a.get("elementId")), "type", "line") == "line":
            continue
        if kind == "play_video" and getattr(elements.get(a.get("elementId")), "type", None) != "video":
            continue
        if kind == "widget_setState" and not isinstance(a.get("state"), dict):
            a["state"] = {}
        if kind == "discussion":
            if a.get("agentId") not in {ag.id for ag in agents}:
                if not students:
                    continue
                a["agentId"] = students[0]
        while a["id"] in seen:
            a["id"] = fmt.new_id("action")
        try:
            msgspec.convert(a, fmt.Action)  # the action must be one the format knows
        except msgspec.ValidationError:
            continue
        seen.add(a["id"])
        out.append(a)
        if kind == "discussion":
            break  # a discussion ends the scene: OpenMAIC's player never reaches what follows it
    if not any(a["type"] == "speech" for a in out):
        out = _default_script(scene, outline, language)
    return [msgspec.convert(a, fmt.Action) for a in out]
