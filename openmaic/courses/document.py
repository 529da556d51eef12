"""A folded course as OpenMAIC's document: what every door serves.

:func:`document_of` is the one place that turns a :class:`~openmaic.courses.events.CourseDocument` into the
format's :class:`~openmaic.courses.format.Document`, so the classroom API, the persistence routes, the classroom
page, the Pro tools, ``openmaic replay`` and the exports all read the same document:

* the stage is the one its writer gave (a browser's save) or, for a generated course, built from the course's
  title, language directive, roster and timestamps; its ``id`` is the course's document id;
* the scenes are the written ones that are ready to play, in order, each with ``stageId`` the stage's id;
* every generated picture or video whose asset is stored is put in its place: an image's placeholder ``src``
  (``gen_img_…``) becomes the asset's URL, a video keeps its ``mediaRef`` and gets ``src`` and ``poster``; a
  placeholder whose generation is pending, failed or disabled stays as it is (the player shows its state from
  ``media``);
* ``stage.videoManifest`` lists every generated video's request by its ref.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from openmaic.courses import format as fmt
from openmaic.courses.events import CourseDocument, SceneMedia
from openmaic.events.log import StreamRow

__all__ = ["apply_media", "asset_url", "dated", "document_of", "stage_of"]

_replace = msgspec.structs.replace


def asset_url(asset_id: str) -> str:
    """Where the course's generated media are served (``GET /api/assets/{id}``)."""
    return f"/api/assets/{asset_id}"


def _done(media: Mapping[str, SceneMedia], ref: Any) -> SceneMedia | None:
    m = media.get(ref) if isinstance(ref, str) else None
    return m if m is not None and m.status == "done" and m.asset_id else None


def _element(e: Any, media: Mapping[str, SceneMedia]) -> Any:
    if isinstance(e, fmt.ImageElement):
        m = _done(media, e.src)
        return _replace(e, src=asset_url(m.asset_id)) if m is not None else e  # type: ignore[arg-type]
    if isinstance(e, fmt.VideoElement):
        m = _done(media, e.mediaRef) or _done(media, e.src)
        if m is None:
            return e
        poster = asset_url(m.poster_asset_id) if m.poster_asset_id else e.poster
        return _replace(e, src=asset_url(m.asset_id), poster=poster)  # type: ignore[arg-type]
    return e


def _page(page: Any, media: Mapping[str, SceneMedia]) -> Any:
    elements = [_element(e, media) for e in page.elements]
    background = page.background
    if isinstance(background, fmt.Background) and isinstance(background.image, fmt.BackgroundImage):
        m = _done(media, background.image.src)
        if m is not None:
            background = _replace(background, image=_replace(background.image, src=asset_url(m.asset_id)))
    if elements == page.elements and background is page.background:
        return page
    return _replace(page, elements=elements, background=background)


def apply_media(scene: fmt.Scene, media: Mapping[str, SceneMedia]) -> fmt.Scene:
    """``scene`` with every generated medium whose asset is stored put in its place (see the module doc)."""
    if not media:
        return scene
    content = scene.content
    if isinstance(content, fmt.SlideContent):
        canvas = _page(content.canvas, media)
        if canvas is not content.canvas:
            scene = _replace(scene, content=_replace(content, canvas=canvas))
    if scene.whiteboards:
        boards = [_page(w, media) for w in scene.whiteboards]
        if any(a is not b for a, b in zip(boards, scene.whiteboards)):
            scene = _replace(scene, whiteboards=boards)
    return scene


def _manifest(doc: CourseDocument) -> dict[str, fmt.VideoManifestEntry]:
    out = {}
    for o in doc.outlines.values():
        for m in o.mediaGenerations or []:
            if m.type == "video":
                out[m.elementId] = fmt.VideoManifestEntry(type="video", prompt=m.prompt, aspectRatio=m.aspectRatio)
    return out


def stage_of(course_id: str, doc: CourseDocument) -> fmt.Stage:
    """The course's stage (see the module doc)."""
    if doc.stage is not None:
        return doc.stage
    stage = fmt.Stage(id=course_id, name=doc.title, createdAt=doc.created_ms, updatedAt=doc.updated_ms)
    extra: dict[str, Any] = {}
    if doc.requirement:
        extra["description"] = doc.requirement
    if doc.language_directive:
        extra["languageDirective"] = doc.language_directive
    if doc.agents:
        extra["generatedAgentConfigs"] = list(doc.agents)
    elif doc.agent_ids:
        extra["agentIds"] = list(doc.agent_ids)
    manifest = _manifest(doc)
    if manifest:
        extra["videoManifest"] = manifest
    if doc.interactive:
        extra["interactiveMode"] = True
    return _replace(stage, **extra) if extra else stage


def document_of(course_id: str, doc: CourseDocument, *, ready_only: bool = True) -> fmt.Document:
    """The course as OpenMAIC's document (see the module doc)."""
    stage = stage_of(course_id, doc)
    scenes = [
        apply_media(s if s.stageId == stage.id else _replace(s, stageId=stage.id), doc.media)
        for s in doc.scenes if not ready_only or s.id in doc.ready
    ]
    return fmt.Document(stage=stage, scenes=scenes, outline=doc.outline)


def dated(doc: CourseDocument, row: StreamRow) -> CourseDocument:
    """``doc`` with the stage's timestamps from its stream row when its events carry none (older logs)."""
    if doc.created_ms:
        return doc
    created = int(row.created_at.timestamp() * 1000)
    return _replace(doc, created_ms=created, updated_ms=max(doc.updated_ms, created,
                                                          int(row.updated_at.timestamp() * 1000)))
