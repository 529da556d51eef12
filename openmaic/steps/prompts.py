"""The messages each generation step sends to its model slot.

Every user message is a block of ``Key: value`` lines (``Requirement:``, ``Title:``, ``Goal:``, ``Kind:``,
``Key points:`` separated by ``;``) followed by JSON context (the outline, the roster, the scene's content).
Real models read it as a brief; the offline demo provider reads exactly these lines and JSON objects, so it
builds a coherent course from the same prompts. Uploaded material is quoted line by line (``> ``) so that its own
text can never pass for one of those lines.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from openmaic.courses.schema import AgentProfile, OutlineItem, SceneContent
from openmaic.models.types import Image, Message, SystemMessage, UserMessage
from openmaic.steps.brief import ResearchSource, RunInput

MATERIALS_IN_OUTLINE = 40_000
MATERIALS_IN_SCENE = 4_000

_encode = msgspec.json.Encoder().encode

_OUTLINE_SYSTEM = (
    "You design short AI classroom courses. Given a learner's requirement (and any material they uploaded), "
    "write a course outline: a title and 4 to 8 scenes in teaching order. Each scene has a title, a goal (what "
    "the learner should get from it), a kind (slide, quiz or interactive) and 2 to 4 key points. Include one "
    "quiz to check understanding; include an interactive scene only when interactive pages are requested. "
    "A scene may show a picture or a short video that helps explain it: list it in the scene's media with a "
    "prompt describing what it depicts and an element id unique in the outline (gen_img_1, gen_vid_1 …); most "
    "scenes need none. Write in the requested language."
)
_AGENTS_SYSTEM = (
    "You cast the agents of an AI classroom: exactly one teacher, usually one teaching assistant, and one or two "
    "classmates with distinct personalities. Ids are short lowercase identifiers, unique within the roster."
)
_CONTENT_SYSTEM = (
    "You write one scene of an AI classroom course. Produce the scene's content for its kind: a slide (title, 3 "
    "to 5 short bullets, speaker notes), a quiz (a few multiple-choice questions with the 0-based index of the "
    "correct option and an explanation) or an interactive page (one self-contained HTML document with inline "
    "CSS and JS and no external resources, plus instructions). Stay within "
    "the scene's goal and key points, consistent with the rest of the outline. Write in the requested language."
)
_ACTIONS_SYSTEM = (
    "You direct how one scene of an AI classroom is presented by its agents: an ordered list of actions "
    "(speech, highlight, ask, pause), each by an agent of the roster (use their ids). The teacher leads; "
    "classmates ask natural questions; the assistant may recap. Keep it short and follow the scene's content."
)


def _line(text: str) -> str:
    return " ".join(text.split())


def _quoted(text: str, limit: int) -> str:
    if len(text) > limit:
        text = text[:limit] + " …"
    return "\n".join("> " + line for line in text.splitlines())


def _brief(inp: RunInput) -> list[str]:
    lines = [f"Requirement: {_line(inp.requirement)}", f"Language: {inp.language}"]
    profile = inp.learner_profile
    learner = "; ".join(p for p in (_line(profile.nickname), _line(profile.bio)) if p)
    if learner:
        lines.append(f"Learner: {learner}")
    lines.append(f"Interactive: {'yes' if inp.interactive else 'no'}")
    return lines


def _materials(text: str, limit: int) -> list[str]:
    if not text.strip():
        return []
    return ["Material uploaded by the learner (quoted):", _quoted(text, limit), ""]


def _scene_lines(item: OutlineItem) -> list[str]:
    lines = [f"Title: {_line(item.title)}", f"Goal: {_line(item.goal)}", f"Kind: {item.kind}"]
    if item.key_points:
        lines.append("Key points: " + "; ".join(_line(p).replace(";", ",") for p in item.key_points))
    return lines


def _outline_json(title: str, items: list[OutlineItem]) -> str:
    return _encode({"course_title": title, "items": items}).decode()


def _research(sources: Sequence[ResearchSource]) -> list[str]:
    if not sources:
        return []
    lines = ["Web research on the requirement (quoted):"]
    for s in sources:
        lines.append(_quoted(f"{_line(s.title)} ({s.url}): {_line(s.content)}", 600))
    return [*lines, ""]


def outline_messages(inp: RunInput, materials: str, images: Sequence[Image] = (),
                     research: Sequence[ResearchSource] = ()) -> list[Message]:
    """The outline step: the requirement, the learner, the material (its text, and its images shown) and what
    the research step found."""
    shown = [f"The {len(images)} attached image(s) are part of the material."] if images else []
    text = "\n".join([*_materials(materials, MATERIALS_IN_OUTLINE), *shown, *_research(research), *_brief(inp), "",
                      "Write the course outline."])  # fmt: skip
    return [SystemMessage(text=_OUTLINE_SYSTEM), UserMessage(text=text, images=tuple(images))]


def agents_messages(inp: RunInput, title: str, items: list[OutlineItem]) -> list[Message]:
    """The agents step (``agents: auto``): the course, so the cast fits its subject."""
    text = "\n".join([*_brief(inp), f"Course: {_line(title)}", "", "The outline:", _outline_json(title, items), "",
                      "Cast the classroom's agents."])
    return [SystemMessage(text=_AGENTS_SYSTEM), UserMessage(text=text)]


def content_messages(
    inp: RunInput, title: str, items: list[OutlineItem], index: int, materials: str
) -> list[Message]:
    """Step ``scene:<i>:content``: the scene, in the context of the whole outline."""
    item = items[index]
    text = "\n".join([
        *_materials(materials, MATERIALS_IN_SCENE),
        "The course outline:", _outline_json(title, items), "",
        *_brief(inp), f"Course: {_line(title)}", f"Position: scene {index + 1} of {len(items)}",
        *_scene_lines(item), "",
        f"Write the content of this {item.kind} scene.",
    ])  # fmt: skip
    return [SystemMessage(text=_CONTENT_SYSTEM), UserMessage(text=text)]


def actions_messages(
    inp: RunInput, title: str, item: OutlineItem, content: SceneContent, agents: list[AgentProfile]
) -> list[Message]:
    """Step ``scene:<i>:actions``: the scene's content and the roster that presents it."""
    text = "\n".join([
        "The roster:", _encode({"agents": agents}).decode(), "",
        "The scene's content:", _encode({"scene_content": content}).decode(), "",
        *_brief(inp), f"Course: {_line(title)}", *_scene_lines(item), "",
        "Write the actions that present this scene.",
    ])  # fmt: skip
    return [SystemMessage(text=_ACTIONS_SYSTEM), UserMessage(text=text)]
