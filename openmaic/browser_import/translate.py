"""A 1.1.x stage and its scenes, as a course holding OpenMAIC's document: pure translation, no I/O.

A 1.1.x browser kept its courses in OpenMAIC's own scene shape (canvases of positioned elements, quizzes, pages,
projects, with their actions), so an imported stage is stored as the document it already was, read through the
course format (:mod:`openmaic.courses.format`; what does not fit is left out one element or action at a time and
counted in ``dropped``), with what has changed since that release put right:

* a picture or video element whose placeholder names a ``mediaFiles`` record points at the asset that record is
  stored as (``/api/assets/<id>``; a video keeps its placeholder as ``mediaRef``); a failed or missing one keeps
  its placeholder (the classroom shows it as missing) and is counted in ``missingMedia``;
* a speech action's clip, when the browser kept it, is stored and named by the action's ``audioId``; the
  transport-only ``audioUrl`` is dropped (and so is an ``audioId`` whose clip was not kept);
* an interactive scene keeps its page (``html`` or ``url``) and loses its retired ``teacherActions``.

Ids: the course is ``course-`` + 16 base64url characters of ``sha256(browserId : stageId)``, so the same browser's
same stage always lands on the same course, which is what makes a repeated import change nothing; assets are
content-addressed per owner as every generated asset is (:func:`openmaic.media.assets.asset_id_for`).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from openmaic.browser_import.records import LegacyMedia, LegacyScene, StageImport
from openmaic.courses import format as fmt
from openmaic.courses.document import asset_url
from openmaic.courses.events import CourseCreated, CourseDocumentSet
from openmaic.courses.lenient import lenient_scene
from openmaic.media.assets import AssetKind, asset_id_for, check_media_type

__all__ = ["ImportedAsset", "Translated", "course_id", "course_language", "translate_stage"]

MAX_TEXT = 2000


class ImportedAsset(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    kind: AssetKind
    media_type: str
    data: bytes


class Translated(msgspec.Struct, frozen=True, kw_only=True):
    """A stage as course events, the assets its scenes use, and what was left out."""

    course_id: str
    created: CourseCreated
    document: CourseDocumentSet
    assets: list[ImportedAsset]
    """Every media and narration record a scene uses."""
    dropped: dict[str, int]
    """What could not be kept, by kind (``missingMedia``, ``elements``, ``actions``, ``scenes``)."""


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode()).digest()


def course_id(browser_id: str, stage_id: str) -> str:
    return "course-" + base64.urlsafe_b64encode(_digest(browser_id, stage_id)).decode()[:16]


def _asset(owner: str, kind: AssetKind, media_type: str, data: bytes) -> ImportedAsset:
    return ImportedAsset(id=asset_id_for(owner, hashlib.sha256(data).digest()), kind=kind, media_type=media_type,
                         data=data)


def course_language(directive: str | None) -> str:
    """A course's language from a browser's language directive (``en`` unless it is a language tag)."""
    language = (directive or "").strip()
    return language[:10] if re.fullmatch(r"[a-z]{2}(-[A-Z]{2})?", language) else "en"


def _count(dropped: dict[str, int], key: str, n: int = 1) -> None:
    if n:
        dropped[key] = dropped.get(key, 0) + n


class _Media:
    """The stage's media and narration records, stored as assets as the scenes name them."""

    def __init__(self, owner: str, stage_id: str, body: StageImport, clip_types: dict[str, str],
                 dropped: dict[str, int]) -> None:
        self.owner, self.stage_id, self.dropped, self.clip_types = owner, stage_id, dropped, clip_types
        self.media: Mapping[str, LegacyMedia] = {m.id: m for m in body.media}
        self.audio = {a.id: a for a in body.audio}
        self.assets: dict[str, ImportedAsset] = {}

    def _keep(self, asset: ImportedAsset) -> str:
        self.assets.setdefault(asset.id, asset)
        return asset.id

    def element(self, e: dict[str, Any]) -> None:
        kind = e.get("type")
        ref = str(e.get("mediaRef") or e.get("src") or "")
        record = self.media.get(f"{self.stage_id}:{ref}") or self.media.get(ref) \
            or self.media.get(f"{self.stage_id}:{e.get('id')}")
        if record is None or record.error or not record.data:
            if ref.startswith(("gen_img_", "gen_vid_")):
                _count(self.dropped, "missingMedia")
                if kind == "video":
                    e["mediaRef"] = ref
                    e.pop("src", None)
            return
        media_type = record.mime_type or ("image/png" if kind == "image" else "video/mp4")
        stored = self._keep(_asset(self.owner, kind, media_type, record.data))
        e["src"] = asset_url(stored)
        if kind == "video":
            e["mediaRef"] = ref or e.get("mediaRef")
            if record.poster:
                e["poster"] = asset_url(self._keep(_asset(self.owner, "poster", "image/jpeg", record.poster)))

    def speech(self, a: dict[str, Any]) -> None:
        a.pop("audioUrl", None)
        clip = self.audio.get(str(a.get("audioId") or ""))
        if clip is None or not clip.data:
            a.pop("audioId", None)
            return
        a["audioId"] = self._keep(_asset(self.owner, "narration", self.clip_types[clip.id], clip.data))


def _scene(s: LegacyScene, stage_id: str, media: _Media, dropped: dict[str, int]) -> fmt.Scene | None:
    content = msgspec.to_builtins(s.content)
    content["type"] = s.type
    content.pop("teacherActions", None)
    canvas = content.get("canvas") if isinstance(content.get("canvas"), dict) else None
    for e in canvas.get("elements") or [] if canvas is not None else []:
        if isinstance(e, dict) and e.get("type") in ("image", "video"):
            media.element(e)
    actions = [dict(a) for a in s.actions if isinstance(a, dict)]
    for a in actions:
        if a.get("type") == "speech":
            media.speech(a)
    raw = {"id": s.id, "stageId": stage_id, "type": s.type, "title": s.title.strip() or s.id, "order": s.order,
           "content": content, "actions": actions}
    scene = lenient_scene(raw, stage_id=stage_id)
    if scene is None:
        _count(dropped, "scenes")
        return None
    if isinstance(scene.content, fmt.SlideContent) and canvas is not None:
        _count(dropped, "elements", len(canvas.get("elements") or []) - len(scene.content.canvas.elements))
    _count(dropped, "actions", len(actions) - len(scene.actions or []))
    return scene


def translate_stage(browser_id: str, owner: str, body: StageImport) -> Translated:
    """The course events and assets of one imported stage of ``owner`` (see the module's doc)."""
    stage = body.stage
    dropped: dict[str, int] = {}
    # Every declared type is checked against the asset store's list before anything is translated: an asset is
    # served under its stored type, so text/html (or a type holding CR LF) must never be stored.
    checked: list[LegacyMedia] = []
    for i, m in enumerate(body.media):
        if m.mime_type:
            m = msgspec.structs.replace(m, mime_type=check_media_type(m.mime_type, path=f"media[{i}].mimeType",
                                                                      kind=f"{m.type}/"))
        checked.append(m)
    clip_types: dict[str, str] = {}
    for i, clip in enumerate(body.audio):
        declared = "audio/mpeg" if clip.format in ("", "mp3") else f"audio/{clip.format}"
        clip_types[clip.id] = check_media_type(declared, path=f"audio[{i}].format", kind="audio/")
    media = _Media(owner, stage.id, msgspec.structs.replace(body, media=checked), clip_types, dropped)
    scenes = [sc for s in sorted(body.scenes, key=lambda s: s.order)
              if (sc := _scene(s, stage.id, media, dropped)) is not None]
    title = stage.name.strip() or "Imported course"
    created_ms = stage.created_at or 0
    document_stage = fmt.Stage(id=stage.id, name=title, createdAt=created_ms,
                               updatedAt=stage.updated_at or created_ms)
    extra: dict[str, Any] = {}
    if stage.description.strip():
        extra["description"] = stage.description[:MAX_TEXT]
    if stage.language_directive:
        extra["languageDirective"] = stage.language_directive
    if stage.agent_ids:
        extra["agentIds"] = list(stage.agent_ids)
    if extra:
        document_stage = msgspec.structs.replace(document_stage, **extra)
    created = CourseCreated(title=title, language=course_language(stage.language_directive),
                            requirement=stage.description[:MAX_TEXT], created_ms=created_ms)
    return Translated(
        course_id=course_id(browser_id, stage.id), created=created,
        document=CourseDocumentSet(document=fmt.Document(stage=document_stage, scenes=scenes)),
        assets=list(media.assets.values()), dropped=dropped,
    )  # fmt: skip
