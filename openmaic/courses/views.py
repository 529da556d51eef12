"""The course document as clients read it (``GET /api/classrooms/{id}``): camelCase, with each scene's content
and its agents' script, and whether a run is still writing it.

A course document is this server's own (OpenMAIC's browser app renders its ``@openmaic/dsl`` stage model, whose
shape is not established here), so these types mirror :mod:`openmaic.courses.schema` field for field, in wire
spelling, and are filled from the folded :class:`~openmaic.courses.events.CourseDocument` by attribute.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from openmaic.courses.events import CourseDocument
from openmaic.wire import Wire

__all__ = ["ClassroomView", "classroom_view"]


class SlideView(Wire):
    title: str
    bullets: list[str]
    notes: str = ""


class QuizQuestionView(Wire):
    question: str
    options: list[str]
    answer: int
    """The 0-based index of the correct option."""
    explanation: str = ""


class QuizView(Wire):
    title: str
    questions: list[QuizQuestionView]


class InteractiveView(Wire):
    title: str
    html: str
    """A self-contained HTML document: show it in a sandboxed frame."""
    instructions: str


class SceneContentView(Wire, omit_defaults=True):
    kind: Literal["slide", "quiz", "interactive"]
    slide: SlideView | None = None
    quiz: QuizView | None = None
    interactive: InteractiveView | None = None


class SceneActionView(Wire):
    kind: Literal["speech", "highlight", "ask", "pause"]
    agent_id: str
    text: str = ""


class SceneActionsView(Wire):
    actions: list[SceneActionView]


class SceneMediaView(Wire):
    element_id: str
    kind: Literal["image", "video"]
    prompt: str
    status: Literal["pending", "generating", "done", "disabled", "failed"]
    """A placeholder stands until ``done``; ``failed`` and ``disabled`` keep it."""
    asset_id: str | None
    """``GET /api/assets/{assetId}`` once ``done``."""
    poster_asset_id: str | None
    """A video's poster frame; the same as ``assetId`` when no encoder made a clip and the frame stands in."""


class SceneView(Wire):
    id: str
    title: str
    goal: str
    kind: Literal["slide", "quiz", "interactive"]
    key_points: list[str]
    content: SceneContentView | None
    actions: SceneActionsView | None
    status: Literal["pending", "ready"]
    """``ready`` once its content and its script are written."""
    media: list[SceneMediaView]
    """Its pictures and videos, in outline order."""
    narration_asset_id: str | None
    """Its narration clip (``GET /api/assets/{id}``), when a speech provider made one."""


class ClassroomAgentView(Wire):
    id: str
    name: str
    role: str
    persona: str


class ClassroomView(Wire):
    id: str
    title: str
    language: str
    requirement: str
    outline_revision: int
    scenes: list[SceneView]
    agents: list[ClassroomAgentView]
    generating_run_id: str | None
    """The run still writing it (its scenes arrive as that run's ``scene_ready`` events), else null."""
    seq: int
    """The course stream's seq this view is at."""


def classroom_view(course_id: str, doc: CourseDocument) -> ClassroomView:
    """The course ``course_id`` as its clients read it."""
    return ClassroomView(
        id=course_id, title=doc.title, language=doc.language, requirement=doc.requirement,
        outline_revision=doc.outline_revision,
        scenes=msgspec.convert(list(doc.scenes), list[SceneView], from_attributes=True),
        agents=msgspec.convert(list(doc.agents), list[ClassroomAgentView], from_attributes=True),
        generating_run_id=doc.locked_by, seq=doc.seq,
    )  # fmt: skip
