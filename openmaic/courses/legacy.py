"""The course shape this server wrote before it wrote OpenMAIC's document, lifted into the document's JSON.

Stored history is never rewritten: the upcasters of the course and run events (``course.scene_set`` v1,
``course.outline_set`` v1, ``course.agents_set`` v1, ``run.scene_content`` v1 …) call these functions when an
old event is read, so a course written before lives on as an OpenMAIC course.

The old shape and what each part becomes:

* a slide ``{title, bullets, notes}`` → a canvas on the format's 1000 × 562.5 viewport: the title as a title text
  element, the bullets as one text element (a ``<p>`` per bullet), a picture or video of the scene beside them
  (its element id is its media ref, so the media lane's settlements still find it), the notes as the canvas's
  ``script`` (speaker notes, never narrated);
* a quiz ``{question, options: [4 strings], answer: 0-based int, explanation}`` → single-choice questions with
  option values ``A``…, the answer as ``["<value>"]``, the explanation as ``analysis``, one point each;
* an interactive page ``{html, instructions}`` → ``{type: interactive, html, url: ""}``;
* actions ``{kind, agent_id, text}`` → speech actions (``speech`` and a classmate's ``ask`` both say their text;
  ``highlight`` points a spotlight at the bullets; ``pause`` has no counterpart and says nothing, so it is left
  out); the scene's one narration clip (old scenes had one file per scene) becomes the ``audioId`` of a single
  speech holding the whole script, so what is heard still matches what is shown;
* an agent ``{id, name, role: teacher|assistant|classmate, persona}`` → an agent config (``classmate`` is
  OpenMAIC's ``student``) with the generator's avatar, colour and priority by position.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["agent_config", "outline_of_scene", "scene_actions", "scene_content", "scene_document"]

TITLE_ID = "text_title"
BODY_ID = "text_body"
_THEME = {
    "backgroundColor": "#ffffff",
    "themeColors": ["#5b9bd5", "#ed7d31", "#a5a5a5", "#ffc000", "#4472c4"],
    "fontColor": "#333333",
    "fontName": "Microsoft YaHei",
}
_COLORS = ["#3b82f6", "#10b981", "#f59e0b", "#ec4899", "#06b6d4", "#8b5cf6", "#f97316", "#14b8a6", "#e11d48",
           "#6366f1", "#84cc16", "#a855f7"]
_AVATARS = {"teacher": "/avatars/teacher.png", "assistant": "/avatars/assist.png"}
_STUDENT_AVATARS = ["/avatars/curious.png", "/avatars/thinker.png", "/avatars/note-taker.png"]
_PRIORITY = {"teacher": 10, "assistant": 7, "student": 5}
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _p(text: str, size: int, *, bold: bool = False) -> str:
    inner = html.escape(text, quote=False)
    return f'<p style="font-size: {size}px;">' + (f"<strong>{inner}</strong>" if bold else inner) + "</p>"


def _text_element(eid: str, left: int, top: int, width: int, height: int, content: str) -> dict[str, Any]:
    return {"type": "text", "id": eid, "left": left, "top": top, "width": width, "height": height, "rotate": 0,
            "content": content, "defaultFontName": "Microsoft YaHei", "defaultColor": "#333333",
            "lineHeight": 1.5, "paragraphSpace": 5}


def _media_element(media: dict[str, Any], left: int, top: int, width: int, height: int) -> dict[str, Any] | None:
    ref = _text(media.get("element_id"))
    if not ref:
        return None
    if media.get("kind") == "video":
        return {"type": "video", "id": f"video_{ref}", "left": left, "top": top, "width": width, "height": height,
                "rotate": 0, "autoplay": False, "mediaRef": ref}
    return {"type": "image", "id": f"image_{ref}", "left": left, "top": top, "width": width, "height": height,
            "rotate": 0, "fixedRatio": True, "src": ref}


def _slide(slide: dict[str, Any], scene: dict[str, Any]) -> dict[str, Any]:
    title = _text(slide.get("title")) or _text(scene.get("title"))
    bullets = [b for b in (slide.get("bullets") or []) if isinstance(b, str) and b.strip()]
    media = [m for m in (scene.get("media") or []) if isinstance(m, dict)]
    body_width = 880 if not media else 480
    elements: list[dict[str, Any]] = [_text_element(TITLE_ID, 60, 50, 880, 70, _p(title, 32, bold=True))]
    if bullets:
        height = min(400, 24 + 30 * len(bullets) + 5 * (len(bullets) - 1))
        elements.append(_text_element(BODY_ID, 60, 140, body_width, height,
                                      "".join(_p("• " + b, 20) for b in bullets)))
    for i, m in enumerate(media[:2]):
        element = _media_element(m, 560, 140 + i * 190, 380, 180 if len(media) > 1 else 214)
        if element is not None:
            elements.append(element)
    canvas: dict[str, Any] = {"id": f"canvas_{_text(scene.get('id')) or 'scene'}", "viewportSize": 1000,
                              "viewportRatio": 0.5625, "theme": _THEME, "elements": elements,
                              "background": {"type": "solid", "color": "#ffffff"}}
    notes = _text(slide.get("notes")).strip()
    if notes:
        canvas["script"] = notes
    return {"type": "slide", "canvas": canvas}


def _quiz(quiz: dict[str, Any]) -> dict[str, Any]:
    questions = []
    for n, q in enumerate(quiz.get("questions") or [], start=1):
        if not isinstance(q, dict):
            continue
        options = [o for o in (q.get("options") or []) if isinstance(o, str)][: len(_LETTERS)]
        answer = q.get("answer")
        item: dict[str, Any] = {
            "id": f"q_{n}", "type": "single", "question": _text(q.get("question")),
            "options": [{"label": o, "value": _LETTERS[i]} for i, o in enumerate(options)],
            "answer": [_LETTERS[answer]] if isinstance(answer, int) and 0 <= answer < len(options) else [],
            "hasAnswer": True, "points": 1,
        }
        if _text(q.get("explanation")):
            item["analysis"] = q["explanation"]
        questions.append(item)
    return {"type": "quiz", "questions": questions}


def scene_content(content: dict[str, Any] | None, scene: dict[str, Any]) -> dict[str, Any] | None:
    """An old ``SceneContent`` (``{kind, slide | quiz | interactive}``) as the format's scene content."""
    if not isinstance(content, dict):
        return None
    kind = content.get("kind")
    if kind == "slide" and isinstance(content.get("slide"), dict):
        return _slide(content["slide"], scene)
    if kind == "quiz" and isinstance(content.get("quiz"), dict):
        return _quiz(content["quiz"])
    if kind == "interactive" and isinstance(content.get("interactive"), dict):
        return {"type": "interactive", "html": _text(content["interactive"].get("html")), "url": ""}
    return None


def scene_actions(actions: Any, *, slide: bool, narration: str | None = None) -> list[dict[str, Any]]:
    """Old actions (``{actions: [{kind, agent_id, text}]}``) as the format's actions (see the module doc)."""
    items = actions.get("actions") if isinstance(actions, dict) else None
    out: list[dict[str, Any]] = []
    spoken: list[str] = []
    for a in items or []:
        if not isinstance(a, dict):
            continue
        text = " ".join(_text(a.get("text")).split())
        kind = a.get("kind")
        if kind in ("speech", "ask") and text:
            spoken.append(text)
            out.append({"type": "speech", "id": f"action_{len(out) + 1}", "text": text})
        elif kind == "highlight" and slide:
            out.append({"type": "spotlight", "id": f"action_{len(out) + 1}", "elementId": BODY_ID})
    if narration:
        # One clip spoke the whole script: one speech carries it, so the audio and the caption agree.
        out = [a for a in out if a["type"] != "speech"]
        out.append({"type": "speech", "id": "action_narration", "text": " ".join(spoken), "audioId": narration})
    return out


def _has_body(content: dict[str, Any]) -> bool:
    canvas = content.get("canvas") if content.get("type") == "slide" else None
    return bool(canvas) and any(e.get("id") == BODY_ID for e in canvas["elements"])


def scene_document(scene: dict[str, Any], order: int = 0) -> dict[str, Any] | None:
    """An old course ``Scene`` as the format's scene JSON (``stageId`` left empty: the view fills it with the
    course's id), or None when it has no content yet (a pending scene)."""
    content = scene_content(scene.get("content"), scene)
    if content is None:
        return None
    actions = scene_actions(scene.get("actions"), slide=content["type"] == "slide",
                            narration=_text(scene.get("narration_asset_id")) or None)
    if not _has_body(content):
        actions = [a for a in actions if a["type"] != "spotlight"]
    out: dict[str, Any] = {"id": _text(scene.get("id")), "stageId": "", "type": content["type"],
                           "title": _text(scene.get("title")), "order": order, "content": content}
    if actions:
        out["actions"] = actions
    return out


def outline_of_scene(scene: dict[str, Any], order: int) -> dict[str, Any]:
    """An old course ``Scene`` (or outline item) as OpenMAIC's ``SceneOutline``."""
    kind = scene.get("kind") if scene.get("kind") in ("slide", "quiz", "interactive") else "slide"
    out: dict[str, Any] = {
        "id": _text(scene.get("id")) or f"scene_{order}", "type": kind, "title": _text(scene.get("title")),
        "description": _text(scene.get("goal")), "keyPoints": [k for k in scene.get("key_points") or []
                                                                if isinstance(k, str)],
        "order": order,
    }
    media = [m for m in (scene.get("media") or []) if isinstance(m, dict) and _text(m.get("element_id"))]
    if media:
        out["mediaGenerations"] = [
            {"type": "video" if m.get("kind") == "video" else "image", "prompt": _text(m.get("prompt")),
             "elementId": m["element_id"], "aspectRatio": m.get("aspect_ratio") or "16:9"}
            for m in media
        ]
    if kind == "quiz":
        out["quizConfig"] = {"questionCount": 3, "difficulty": "medium", "questionTypes": ["single"]}
    return out


def agent_config(agent: dict[str, Any], index: int) -> dict[str, Any]:
    """An old agent profile as an OpenMAIC agent config."""
    role = {"teacher": "teacher", "assistant": "assistant"}.get(_text(agent.get("role")), "student")
    students_before = index if role == "student" else 0
    avatar = _AVATARS.get(role) or _STUDENT_AVATARS[students_before % len(_STUDENT_AVATARS)]
    return {"id": _text(agent.get("id")) or f"agent-{index + 1}", "name": _text(agent.get("name")) or role.title(),
            "role": role, "persona": _text(agent.get("persona")), "avatar": avatar,
            "color": _COLORS[index % len(_COLORS)], "priority": _PRIORITY[role]}
