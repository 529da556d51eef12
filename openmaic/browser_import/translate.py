"""A 1.1.x stage and its scenes, as this server's course: pure translation, no I/O.

The browser's course document and this server's differ (OpenMAIC 1.1.x drew slides as canvases of positioned
elements; a course here keeps a slide's title, bullets and notes), so the translation keeps what a course here can
hold and says what it could not:

* a **slide**: its text elements, stripped of their HTML, in reading order (top to bottom, then left to right),
  become the bullets (the first one is the title when it repeats the scene's title); the speech of its actions
  becomes the notes; its picture and video elements become the scene's media, each pointing at the asset its
  ``mediaFiles`` record was stored as (a failed or missing one stays a ``failed`` placeholder);
* a **quiz**: its single- and multiple-choice questions (the first correct option is the answer); a
  short-answer question has no options to keep and is left out;
* an **interactive** page: its HTML; one known only by its URL becomes a slide naming it;
* a **project** (``pbl``): a slide with its title and description;
* **actions**: speech (with its speaker) and discussion prompts (as questions to the class); spotlights and
  laser pointers belong to the canvas and are dropped. A speech action's clip, when the browser kept it, is the
  scene's narration when it is the scene's only one.

Ids: the course is ``course-`` + 16 base64url characters of ``sha256(browserId : stageId)``, so the same browser's
same stage always lands on the same course, which is what makes a repeated import change nothing; assets are
content-addressed per owner as every generated asset is (:func:`openmaic.media.assets.asset_id_for`).
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from openmaic.browser_import.records import LegacyMedia, LegacyScene, StageImport
from openmaic.courses.events import CourseCreated, CourseOutlineSet, Scene, SceneMedia
from openmaic.courses.schema import (
    ELEMENT_ID, Interactive, Quiz, QuizQuestion, SceneAction, SceneActions, SceneContent, Slide,
)  # fmt: skip
from openmaic.media.assets import AssetKind, asset_id_for, check_media_type

__all__ = [
    "ImportedAsset", "MediaOf", "NarrationOf", "Translated", "course_id", "course_language", "plain_text",
    "translate_scene", "translate_stage",
]

_TAG = re.compile(r"<[^>]*>")
_BLOCK = re.compile(r"</(p|div|li|h[1-6])>|<br\s*/?>", re.IGNORECASE)
_SPACE = re.compile(r"[ \t\r\f\v]+")
MAX_BULLETS = 12
MAX_TEXT = 2000


class Translated(msgspec.Struct, frozen=True, kw_only=True):
    """A stage as course events, the assets its scenes use, and what was left out."""

    course_id: str
    created: CourseCreated
    outline: CourseOutlineSet
    assets: list[ImportedAsset]
    """Every media and narration record a scene uses."""
    dropped: dict[str, int]
    """What could not be kept, by kind (``shortAnswerQuestions``, ``missingMedia``, …)."""


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode()).digest()


def course_id(browser_id: str, stage_id: str) -> str:
    return "course-" + base64.urlsafe_b64encode(_digest(browser_id, stage_id)).decode()[:16]


class ImportedAsset(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    kind: AssetKind
    media_type: str
    data: bytes


def _asset(owner: str, kind: AssetKind, media_type: str, data: bytes) -> ImportedAsset:
    return ImportedAsset(id=asset_id_for(owner, hashlib.sha256(data).digest()), kind=kind, media_type=media_type,
                         data=data)


def plain_text(value: Any) -> str:
    """The text of an HTML fragment (a slide's text element): tags removed, entities decoded, lines kept."""
    if not isinstance(value, str):
        return ""
    text = html.unescape(_TAG.sub("", _BLOCK.sub("\n", value)))
    lines = (_SPACE.sub(" ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)[:MAX_TEXT]


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def canvas_elements(scene: LegacyScene) -> list[Mapping[str, Any]]:
    canvas = scene.content.get("canvas")
    elements = canvas.get("elements") if isinstance(canvas, Mapping) else None
    found = [e for e in elements if isinstance(e, Mapping)] if isinstance(elements, list) else []
    return sorted(found, key=lambda e: (_num(e.get("top")), _num(e.get("left"))))


def _speech(scene: LegacyScene, dropped: dict[str, int]) -> list[SceneAction]:
    out: list[SceneAction] = []
    for a in scene.actions:
        kind, text = a.get("type"), a.get("text") or a.get("topic") or ""
        speaker = a.get("agentId") if isinstance(a.get("agentId"), str) and a.get("agentId") else "teacher"
        if kind == "speech" and isinstance(text, str) and text.strip():
            out.append(SceneAction(kind="speech", agent_id=speaker, text=text.strip()[:MAX_TEXT]))
        elif kind == "discussion" and isinstance(text, str) and text.strip():
            out.append(SceneAction(kind="ask", agent_id=speaker, text=text.strip()[:MAX_TEXT]))
        else:
            dropped["canvasActions"] = dropped.get("canvasActions", 0) + 1
    return out


def _quiz(scene: LegacyScene, title: str, dropped: dict[str, int]) -> Quiz | None:
    questions: list[QuizQuestion] = []
    raw = scene.content.get("questions")
    for q in raw if isinstance(raw, list) else []:
        if not isinstance(q, Mapping):
            continue
        options = [o for o in q.get("options") or [] if isinstance(o, Mapping)]
        if q.get("type") == "short_answer" or len(options) < 2:
            dropped["shortAnswerQuestions"] = dropped.get("shortAnswerQuestions", 0) + 1
            continue
        values = [str(o.get("value", "")) for o in options]
        correct = [str(v) for v in q.get("answer") or []]
        answer = next((values.index(v) for v in correct if v in values), 0)
        questions.append(QuizQuestion(
            question=plain_text(q.get("question")) or "?",
            options=[plain_text(o.get("label")) or str(o.get("value", "")) for o in options],
            answer=answer, explanation=plain_text(q.get("analysis")),
        ))  # fmt: skip
    return Quiz(title=title, questions=questions) if questions else None


def _media_of(scene: LegacyScene, stage_id: str, owner: str, media: Mapping[str, LegacyMedia],
              dropped: dict[str, int]) -> tuple[list[SceneMedia], list[ImportedAsset]]:
    out: list[SceneMedia] = []
    assets: list[ImportedAsset] = []
    for e in canvas_elements(scene):
        kind = e.get("type")
        if kind not in ("image", "video"):
            continue
        element = str(e.get("id") or "")
        if element and not ELEMENT_ID.match(element):
            # A media element id is used in URLs (media retry) and must have the shape of the ones made here.
            element = "el-" + _digest(stage_id, scene.id, element).hex()[:16]
        src = str(e.get("src") or "")
        record = media.get(f"{stage_id}:{src}") or media.get(src) or media.get(f"{stage_id}:{element}")
        if not element or record is None or record.error or not record.data:
            dropped["missingMedia"] = dropped.get("missingMedia", 0) + 1
            if element:
                out.append(SceneMedia(element_id=element, kind=kind, prompt="", status="failed"))
            continue
        stored = _asset(owner, kind, record.mime_type or ("image/png" if kind == "image" else "video/mp4"), record.data)
        assets.append(stored)
        poster = None
        if record.poster:
            assets.append(poster := _asset(owner, "poster", "image/jpeg", record.poster))
        out.append(SceneMedia(element_id=element, kind=kind, prompt=record.prompt[:MAX_TEXT], status="done",
                              asset_id=stored.id, poster_asset_id=poster.id if poster else None))
    return out, assets


MediaOf = Callable[[LegacyScene, dict[str, int]], tuple[list[SceneMedia], list[ImportedAsset]]]
"""A scene's picture and video elements as course media, with the assets they use."""
NarrationOf = Callable[[str], tuple[str | None, list[ImportedAsset]]]
"""The asset of a speech action's clip (its ``audioId``), and what must be stored for it."""


def translate_scene(s: LegacyScene, *, scene_id: str, goal: str, number: int, media_of: MediaOf,
                    narration_of: NarrationOf, dropped: dict[str, int]) -> tuple[Scene, list[ImportedAsset]]:
    """One browser scene as a course scene (the ``number``-th, from 1), and the assets it uses (see the module's
    doc); what it could not keep is counted in ``dropped``."""
    name = s.title.strip() or f"Scene {number}"
    actions = _speech(s, dropped)
    assets: list[ImportedAsset] = []
    content: SceneContent
    scene_media: list[SceneMedia] = []
    if s.type == "quiz" and (quiz := _quiz(s, name, dropped)) is not None:
        content = SceneContent(kind="quiz", quiz=quiz)
    elif s.type == "interactive" and isinstance(s.content.get("html"), str) and s.content["html"].strip():
        content = SceneContent(kind="interactive", interactive=Interactive(
            title=name, html=s.content["html"], instructions=""))
    else:
        if s.type == "slide":
            texts = [t for t in (plain_text(e.get("content")) for e in canvas_elements(s) if e.get("type") == "text")
                     if t]
            bullets = [t for t in texts if t.splitlines()[0] != name] if texts else []
            scene_media, used = media_of(s, dropped)
            assets += used
        elif s.type == "interactive":
            bullets = [f"Interactive page: {s.content.get('url') or 'not kept by the browser'}"]
        elif s.type == "pbl":
            project = s.content.get("projectConfig")
            project = project if isinstance(project, Mapping) else {}
            bullets = [t for t in (plain_text(project.get("title")), plain_text(project.get("description"))) if t]
        else:  # a quiz with no question a course here can hold
            bullets = []
        notes = "\n".join(a.text for a in actions if a.kind == "speech")[:MAX_TEXT]
        content = SceneContent(kind="slide", slide=Slide(title=name, bullets=bullets[:MAX_BULLETS], notes=notes))
    narration = None
    clips = [a.get("audioId") for a in s.actions if a.get("type") == "speech" and a.get("audioId")]
    if len(clips) == 1:
        narration, used = narration_of(str(clips[0]))
        assets += used
    elif len(clips) > 1:
        dropped["narrationClips"] = dropped.get("narrationClips", 0) + len(clips)
    first = content.slide.bullets[:3] if content.slide else []
    scene = Scene(id=scene_id, title=name, goal=goal[:MAX_TEXT] or name, kind=content.kind, key_points=first,
                  content=content, actions=SceneActions(actions=actions), status="ready", media=scene_media,
                  narration_asset_id=narration)
    return scene, assets


def course_language(directive: str | None) -> str:
    """A course's language from a browser's language directive (``en`` unless it is a language tag)."""
    language = (directive or "").strip()
    return language[:10] if re.fullmatch(r"[a-z]{2}(-[A-Z]{2})?", language) else "en"


def translate_stage(browser_id: str, owner: str, body: StageImport) -> Translated:
    """The course events and assets of one imported stage of ``owner`` (see the module's doc)."""
    stage = body.stage
    dropped: dict[str, int] = {}
    # Every declared type is checked against the asset store's list before anything is translated: an asset is
    # served under its stored type, so text/html (or a type holding CR LF) must never be stored.
    media: dict[str, LegacyMedia] = {}
    for i, m in enumerate(body.media):
        if m.mime_type:
            m = msgspec.structs.replace(m, mime_type=check_media_type(m.mime_type, path=f"media[{i}].mimeType",
                                                                      kind=f"{m.type}/"))
        media[m.id] = m
    clip_types: dict[str, str] = {}
    for i, a in enumerate(body.audio):
        declared = "audio/mpeg" if a.format in ("", "mp3") else f"audio/{a.format}"
        clip_types[a.id] = check_media_type(declared, path=f"audio[{i}].format", kind="audio/")
    audio = {a.id: a for a in body.audio}
    title = stage.name.strip() or "Imported course"

    def narration_of(clip_id: str) -> tuple[str | None, list[ImportedAsset]]:
        clip = audio.get(clip_id)
        if clip is None or not clip.data:
            return None, []
        stored = _asset(owner, "narration", clip_types[clip_id], clip.data)
        return stored.id, [stored]

    scenes: list[Scene] = []
    assets: list[ImportedAsset] = []
    for s in sorted(body.scenes, key=lambda s: s.order):
        scene, used = translate_scene(
            s, scene_id=f"scene-{_digest(browser_id, stage.id, s.id).hex()[:16]}", goal=stage.description.strip(),
            number=len(scenes) + 1, media_of=lambda sc, d: _media_of(sc, stage.id, owner, media, d),
            narration_of=narration_of, dropped=dropped)  # fmt: skip
        scenes.append(scene)
        assets += used
    created = CourseCreated(title=title, language=course_language(stage.language_directive),
                            requirement=stage.description[:MAX_TEXT])
    return Translated(
        course_id=course_id(browser_id, stage.id), created=created,
        outline=CourseOutlineSet(revision=1, title=title, scenes=scenes),
        assets=list({a.id: a for a in assets}.values()), dropped=dropped,
    )  # fmt: skip
