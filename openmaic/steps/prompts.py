"""The messages each generation step sends to its model slot: OpenMAIC's course format, asked for as JSON.

Every step asks for the format's own shapes (OpenMAIC's generation pipeline asks for the same ones): an outline
object, an agents object, a slide ``{background, elements, remark}``, a JSON array of quiz questions, one complete
HTML document for an interactive scene, and a JSON array of speech and action items for a scene's script. What a
model answers is parsed with repair, normalized and validated by :mod:`openmaic.steps.outputs`; nothing is trusted.

Each user message ends with the step's **brief**: a line ``Brief (JSON):`` and one JSON object holding every input
of the step (``step``, ``requirement``, ``language``, the scene, the roster …). Real models read it as part of the
prompt; the offline demo provider answers from it alone. Uploaded material and web research are quoted above the
brief, line by line (``> ``), so their text can never pass for an instruction or for the brief.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic.courses import format as fmt
from openmaic.models.types import Image, Message, SystemMessage, UserMessage
from openmaic.steps.brief import ResearchSource, RunInput

__all__ = [
    "BRIEF_MARKER", "MATERIALS_IN_OUTLINE", "MATERIALS_IN_SCENE", "actions_messages", "agents_messages",
    "content_messages", "outline_messages",
]  # fmt: skip

MATERIALS_IN_OUTLINE = 40_000
MATERIALS_IN_SCENE = 4_000
BRIEF_MARKER = "Brief (JSON):"

_encode = msgspec.json.Encoder().encode

_JSON_RULES = (
    "Answer with JSON only: no prose before or after it, no comments, no trailing commas. Escape every backslash "
    "in strings (write \\\\frac, not \\frac)."
)

_OUTLINE_SYSTEM = f"""You plan short AI classroom courses in the format of OpenMAIC.
From the learner's requirement (and any material or research quoted for you), infer the topic, the audience and
their level, and plan 4 to 8 scenes in teaching order (one to three minutes each).

Answer with one JSON object:
{{"languageDirective": "2 to 5 sentences: the teaching language (the requirement's language unless it asks
otherwise), how to handle terminology and other languages",
 "courseTitle": "a noun phrase of at most 30 characters in the teaching language",
 "outlines": [SceneOutline, ...]}}

A SceneOutline is {{"id": "scene_1", "type": "slide" | "quiz" | "interactive", "title": "neutral, topic-focused",
"description": "one or two sentences: what the scene teaches", "keyPoints": ["3 to 5 points"], "order": 1}}, plus:
- for a quiz: "quizConfig": {{"questionCount": 2 to 4, "difficulty": "easy" | "medium" | "hard",
  "questionTypes": a subset of ["single", "multiple", "short_answer"]}};
- for an interactive scene: "widgetType": "simulation" | "diagram" | "code" | "game" | "visualization3d" and
  "widgetOutline": {{"concept": "...", "keyVariables": [...]}} (a diagram: "diagramType", "nodes"; code:
  "language", "challengeType"; a game: "gameType", "challenge");
- where a picture or a short video really helps (only when their generation is on, at most one per scene):
  "mediaGenerations": [{{"type": "image" | "video", "prompt": "what it shows, in English, no text in the picture",
  "elementId": "gen_img_1" | "gen_vid_1", "aspectRatio": "16:9"}}] (number them across the whole course).
Include one quiz to check understanding. Include an interactive scene only when the brief says interactive is on
(then one or two). Teach in the learner's language; keep product and programming names in English.
Write key points that a slide can show: charts or tables as "[Chart] …" or "[Table] …" when data fits.
{_JSON_RULES}"""

_AGENTS_SYSTEM = f"""You cast the agents of an AI classroom: exactly one teacher, one teaching assistant and one
or two students with distinct personalities, named and described in the course's teaching language.
Answer with one JSON object: {{"agents": [{{"name": "...", "role": "teacher" | "assistant" | "student",
"persona": "two or three sentences"}}]}}. {_JSON_RULES}"""

_SLIDE_SYSTEM = f"""You design one slide of an AI classroom course on OpenMAIC's canvas: 1000 × 562.5 design
pixels, origin top-left, a 50 px margin on every side.
Answer with one JSON object: {{"background": {{"type": "solid", "color": "#ffffff"}}, "elements": [...],
"remark": "a note for the teacher"}}. Elements are drawn in array order (later ones on top). Every element has
"id" (unique on the slide), "type", "left", "top", "width", "height" and "rotate": 0 (a line has no height and no
rotate), and the fields of its type:
- text: "content" (HTML: one <p> per line; <strong>, <em>, <u>, <span style="color: …">; inline font-size in px
  such as <p style="font-size: 32px;">), "defaultFontName": "Microsoft YaHei", "defaultColor": "#333333",
  "lineHeight": 1.5. Height for one line at 32 px is 70, at 24 px 58, at 20 px 52, at 18 px 49, at 16 px 46; each
  more line adds about 1.5 × the font size. Titles 32 to 36 px, key points 18 to 20 px, body 16 to 18 px.
- shape: "path" (SVG path in "viewBox" units), "viewBox": [1, 1], "fill": "#dbeafe", "fixedRatio": false; a
  rectangle is "M 0 0 L 1 0 L 1 1 L 0 1 Z", a circle "M 1 0.5 A 0.5 0.5 0 1 1 0 0.5 A 0.5 0.5 0 1 1 1 0.5 Z".
- line: "start": [0, 0], "end": [x, y] relative to left/top, "width": 2 to 6 (the stroke), "style": "solid",
  "color": "#5b9bd5", "points": ["", "arrow"].
- image: "src" one of the media refs the brief lists (never invent a URL), "fixedRatio": true; size the box to
  its aspect ratio.
- video: "mediaRef" the video ref the brief lists, "autoplay": false.
- latex: "latex" (TeX, backslashes escaped) only; it is rendered for you.
- table: "data" (rows of cells {{"id", "colspan": 1, "rowspan": 1, "text"}}), "colWidths" (fractions summing to
  1), "cellMinHeight": 36, "outline": {{"width": 1, "style": "solid", "color": "#cbd5e1"}}.
- chart: "chartType" (bar, column, line, pie, ring, area, radar, scatter), "data" {{"labels", "legends",
  "series": [[numbers per label] per legend]}}, "themeColors": ["#5b9bd5", "#ed7d31"].
- code: "language", "lines": [{{"id": "L1", "content": "…"}}].
Keep text short (keywords and short phrases: the teacher speaks the rest); no formulas inside text or tables.
Never write the teacher's name on the slide. Stay within the scene's key points. {_JSON_RULES}"""

_QUIZ_SYSTEM = f"""You write the questions of one quiz scene of an AI classroom course.
Answer with a JSON array of questions: {{"id": "q1", "type": "single" | "multiple" | "short_answer",
"question": "...", "options": [{{"label": "text of the option", "value": "A"}}, ...], "answer": ["A"],
"analysis": "why the answer is right", "points": 10}}. Choice questions have 3 or 4 options with values "A", "B",
"C", "D"; "answer" lists the values of the correct options (one for single, two or more for multiple). A short
answer has no options and no answer but a "commentPrompt": the rubric a grader uses. Harder questions are worth
more points. Use the requested question types and count; maths as plain text. {_JSON_RULES}"""

_INTERACTIVE_SYSTEM = """You build one interactive page of an AI classroom course: a self-contained HTML document
(inline CSS and JavaScript, no external resources at all: it runs sandboxed with no network) that lets the learner
explore the scene's concept.
Answer with the document only, from <!DOCTYPE html> to </html>. It must:
- embed its configuration as <script type="application/json" id="widget-config">{"type": "<widget type>", ...}
  </script>;
- give its controls stable ids (#<variable>-slider, #result-display, #reset-btn, [data-step-id="step-1"]) and a
  reset that restores the exact initial state;
- listen for window "message" events whose data is {type, target, state, content} and handle SET_WIDGET_STATE
  (apply state, redraw), HIGHLIGHT_ELEMENT (emphasise the target for a few seconds), ANNOTATE_ELEMENT (show content
  near the target) and REVEAL_ELEMENT (make the target visible);
- fill the frame and work on a phone's width; all text in the course's teaching language."""

_ACTIONS_SYSTEM = f"""You write the script of one scene of an AI classroom course: what the teacher says, and
what happens on screen while they say it.
Answer with a JSON array, in playing order, of items:
- {{"type": "text", "content": "what the teacher says"}} (one continuous monologue in the teaching language: no
  speaker labels, no stage directions; greet only on the first scene; refer back with "as we just saw");
- {{"type": "action", "name": "<action>", "params": {{...}}}}.
Actions by scene type:
- slide: "spotlight" {{"elementId"}} or "laser" {{"elementId"}} just before the speech about that element (ids
  from the brief's elements only), "play_video" {{"elementId"}} after a speech that introduces a video element,
  and at most one "discussion" {{"topic", "prompt", "agentId": a student of the roster}} as the very last item,
  only where a question invites debate; whiteboard actions may explain a step by step derivation: "wb_open",
  "wb_draw_text" {{"content", "x", "y", "width", "height", "fontSize"}}, "wb_draw_latex" {{"latex", "x", "y"}},
  "wb_draw_line" {{"startX", "startY", "endX", "endY"}}, "wb_close" (a 1000 × 563 board);
- quiz: one short framing speech that does not hint at any answer;
- interactive: speech with "widget_highlight" {{"target"}}, "widget_setState" {{"state", "content"}},
  "widget_annotation" {{"target", "content"}}, "widget_reveal" {{"target"}}, targets from the brief's selectors.
5 to 10 items for a slide. {_JSON_RULES}"""

_SYSTEMS = {"slide": _SLIDE_SYSTEM, "quiz": _QUIZ_SYSTEM, "interactive": _INTERACTIVE_SYSTEM}


def _quoted(text: str, limit: int) -> str:
    if len(text) > limit:
        text = text[:limit] + " …"
    return "\n".join("> " + line for line in text.splitlines())


def _materials(text: str, limit: int) -> list[str]:
    if not text.strip():
        return []
    return ["Material uploaded by the learner (quoted):", _quoted(text, limit), ""]


def _research(sources: Sequence[ResearchSource]) -> list[str]:
    if not sources:
        return []
    lines = ["Web research on the requirement (quoted):"]
    for s in sources:
        lines.append(_quoted(f"{' '.join(s.title.split())} ({s.url}): {' '.join(s.content.split())}", 600))
    return [*lines, ""]


def _common(inp: RunInput, course: Any = None) -> dict[str, Any]:
    brief: dict[str, Any] = {"requirement": inp.requirement, "language": inp.language}
    if course is not None:
        brief["courseTitle"] = course.title
        brief["languageDirective"] = course.language_directive
    return brief


def _user(lines: list[str], brief: dict[str, Any], ask: str, images: Sequence[Image] = ()) -> UserMessage:
    text = "\n".join([*lines, ask, "", BRIEF_MARKER, _encode(brief).decode()])
    return UserMessage(text=text, images=tuple(images))


def outline_messages(inp: RunInput, materials: str, images: Sequence[Image] = (),
                     research: Sequence[ResearchSource] = (), *, image_generation: bool = False,
                     video_generation: bool = False) -> list[Message]:
    """The outline step: the requirement, the learner, the material (its text, and its images shown) and what
    the research step found."""
    profile = inp.learner_profile
    brief = {"step": "outline", **_common(inp), "interactive": inp.interactive,
             "imageGeneration": image_generation, "videoGeneration": video_generation,
             "learnerProfile": {"nickname": profile.nickname, "bio": profile.bio}
             if (profile.nickname or profile.bio) else None,
             "research": [{"title": s.title, "url": s.url, "snippet": s.content[:300]} for s in research],
             "materials": bool(materials.strip())}
    shown = [f"The {len(images)} attached image(s) are part of the material.", ""] if images else []
    lines = [*_materials(materials, MATERIALS_IN_OUTLINE), *shown, *_research(research)]
    return [SystemMessage(text=_OUTLINE_SYSTEM), _user(lines, brief, "Plan the course.", images)]


class CourseBrief(msgspec.Struct, frozen=True, kw_only=True):
    """What every scene step knows of the course: its title, language directive and outline."""

    title: str
    language_directive: str
    outlines: tuple[fmt.SceneOutline, ...]


def _titles(course: CourseBrief) -> list[dict[str, Any]]:
    return [{"title": o.title, "type": o.type} for o in course.outlines]


def agents_messages(inp: RunInput, course: CourseBrief) -> list[Message]:
    """The agents step (``agents: auto``): the course, so the cast fits its subject."""
    brief = {"step": "agents", **_common(inp, course), "outlines": _titles(course)}
    return [SystemMessage(text=_AGENTS_SYSTEM), _user([], brief, "Cast the classroom's agents.")]


def content_messages(inp: RunInput, course: CourseBrief, index: int, materials: str, *,
                     media: Sequence[dict[str, Any]] = (), teacher: fmt.AgentConfig | None = None) -> list[Message]:
    """Step ``scene:<i>:content``: the scene in the context of the whole outline; ``media`` are the refs its
    slide may place (``{ref, type, prompt, aspectRatio}``)."""
    outline = course.outlines[index]
    brief: dict[str, Any] = {"step": outline.type, **_common(inp, course), "scene": outline,
                             "outlines": _titles(course)}
    if outline.type == "slide":
        brief["media"] = list(media)
        brief["teacher"] = {"name": teacher.name, "persona": teacher.persona} if teacher is not None else None
    ask = {"slide": "Design this slide.", "quiz": "Write this quiz's questions.",
           "interactive": "Build this interactive page."}.get(outline.type, "Write this scene.")
    lines = _materials(materials, MATERIALS_IN_SCENE)
    return [SystemMessage(text=_SYSTEMS.get(outline.type, _SLIDE_SYSTEM)), _user(lines, brief, ask)]


def actions_messages(inp: RunInput, course: CourseBrief, index: int, *, elements: Sequence[dict[str, Any]] = (),
                     questions: Sequence[dict[str, Any]] = (), widget: dict[str, Any] | None = None,
                     agents: Sequence[fmt.AgentConfig] = (), previous_speech: str = "") -> list[Message]:
    """Step ``scene:<i>:actions``: the scene's content (summarised: element ids and what they show, the
    questions, the widget's selectors) and the roster."""
    outline = course.outlines[index]
    total = len(course.outlines)
    position = "first" if index == 0 else "last" if index == total - 1 else "middle"
    brief: dict[str, Any] = {
        "step": "actions", **_common(inp, course), "sceneType": outline.type, "scene": outline,
        "agents": [{"id": a.id, "name": a.name, "role": a.role} for a in agents], "position": position,
        "outlines": _titles(course), "previousSpeech": previous_speech[-400:],
    }
    if outline.type == "slide":
        brief["elements"] = list(elements)
    elif outline.type == "quiz":
        brief["questions"] = list(questions)
    elif widget is not None:
        brief["widget"] = widget
    return [SystemMessage(text=_ACTIONS_SYSTEM), _user([], brief, "Write this scene's script.")]
