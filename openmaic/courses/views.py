"""The course as clients read it (``GET /api/classrooms/{id}``): OpenMAIC's document, plus what a live classroom
needs beside it.

``stage`` and ``scenes`` are exactly the document every door serves (:func:`openmaic.courses.document.document_of`):
the file-backed classroom payload of OpenMAIC's own server routes is ``{id, stage, scenes, createdAt}``, and this
view is that payload with the document's ``dslVersion`` and ``outline``, the run still writing it
(``generatingRunId``), the scenes of its outline not written yet (``pendingScenes``), the state of each generated
picture or video by its ref (``media``) and the course stream's ``seq``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

import msgspec

from openmaic.courses import format as fmt
from openmaic.courses.document import document_of
from openmaic.courses.events import CourseDocument
from openmaic.wire import Wire

__all__ = ["ClassroomView", "MediaView", "PendingSceneView", "classroom_view"]


class MediaView(Wire, omit_defaults=True):
    status: Literal["pending", "generating", "done", "disabled", "failed"]
    """A placeholder stands until ``done``; ``failed`` and ``disabled`` keep it."""
    kind: Literal["image", "video"]
    scene_id: str | None = None
    asset_id: str | None = None
    """``GET /api/assets/{assetId}`` once ``done``."""
    poster_asset_id: str | None = None


class PendingSceneView(Wire):
    id: str
    title: str
    type: str
    order: int


class ClassroomView(Wire, omit_defaults=True):
    id: str
    stage: fmt.Stage
    scenes: list[fmt.Scene]
    """The scenes ready to play, by ``order``: OpenMAIC's scenes as they are."""
    dsl_version: str
    created_at: dt.datetime
    generating_run_id: str | None
    """The run still writing it (its scenes arrive as that run's ``scene_ready`` events), else null."""
    pending_scenes: list[PendingSceneView]
    """Scenes of the outline not ready yet (being written, or waiting for their turn)."""
    media: dict[str, MediaView]
    """Each generated picture or video by the ref its element names."""
    seq: int
    """The course stream's seq this view is at."""
    outline: Any = msgspec.UNSET
    language: str = ""
    """This server's addition: the language tag the course is written in (empty for a browser's document)."""


def _scene_of(doc: CourseDocument) -> dict[str, str]:
    at: dict[str, str] = {}
    for sid, outline in doc.outlines.items():
        for m in outline.mediaGenerations or []:
            at.setdefault(m.elementId, sid)
    return at


def classroom_view(course_id: str, doc: CourseDocument) -> ClassroomView:
    """The course ``course_id`` as its clients read it."""
    document = document_of(course_id, doc)
    ready = {s.id for s in document.scenes}
    pending = [PendingSceneView(id=p.id, title=p.title, type=p.type, order=p.order) for p in doc.pending]
    pending += [PendingSceneView(id=s.id, title=s.title, type=s.type, order=int(s.order))
                for s in doc.scenes if s.id not in ready]
    where = _scene_of(doc)
    media = {ref: MediaView(status=m.status, kind=m.kind, scene_id=where.get(ref), asset_id=m.asset_id,
                            poster_asset_id=m.poster_asset_id) for ref, m in doc.media.items()}
    created = dt.datetime.fromtimestamp(document.stage.createdAt / 1000, dt.UTC)
    return ClassroomView(
        id=course_id, stage=document.stage, scenes=document.scenes, dsl_version=document.dslVersion,
        created_at=created, generating_run_id=doc.locked_by, pending_scenes=sorted(pending, key=lambda p: p.order),
        media=media, seq=doc.seq, outline=document.outline, language="" if doc.browser else doc.language,
    )
