"""Projections: read models derived from the global log, applied exactly once, rebuildable at any time.

The read models the API reads (tables and columns are documented in each module):

* ``library_cards`` (:mod:`.library`) — one card per course, with its run's state label;
* ``course_documents`` (:mod:`.documents`) — each course's folded :class:`~openmaic.courses.events.CourseDocument`;
* ``model_history`` (:mod:`.history`) — each workbench session's provider-facing transcript;
* ``session_list`` (:mod:`.sessions`) — each owner's sessions with status and title.

:func:`run_projectors` is the ``projector`` role; :func:`rebuild` and :func:`projection_status` back
``openmaic projections rebuild|status``.
"""

from __future__ import annotations

from openmaic.projections.base import (
    CheckpointMoved,
    Context,
    Projection,
    ProjectionPaused,
    RebuildRunning,
    Tables,
    UnknownProjection,
    lock_key,
)
from openmaic.projections.documents import CourseDocuments
from openmaic.projections.history import AssistantMessage, HistoryMessage, ModelHistory, ToolMessage, UserMessage
from openmaic.projections.library import LibraryCard, LibraryCards, card_label
from openmaic.projections.projector import Applier, Projector, run_projectors
from openmaic.projections.rebuild import (
    ProjectionStatus, RebuildResult, projection_status, rebuild, record_projection_lag,
)  # fmt: skip
from openmaic.projections.sessions import SessionList

__all__ = [
    "Applier", "AssistantMessage", "CheckpointMoved", "Context", "CourseDocuments", "HistoryMessage",
    "LibraryCard", "LibraryCards", "ModelHistory", "Projection", "ProjectionPaused", "ProjectionStatus", "Projector",
    "RebuildResult", "RebuildRunning", "SessionList", "Tables", "ToolMessage", "UnknownProjection", "UserMessage",
    "card_label", "default_projections", "get_projection", "lock_key", "projection_status", "rebuild",
    "record_projection_lag", "run_projectors",
]  # fmt: skip


def default_projections() -> list[Projection]:
    """One instance of every read model openmaic maintains, in a stable order."""
    return [LibraryCards(), CourseDocuments(), ModelHistory(), SessionList()]


def get_projection(name: str, projections: list[Projection] | None = None) -> Projection:
    """The projection called ``name``; :class:`UnknownProjection` (naming the known ones) otherwise."""
    for p in projections if projections is not None else default_projections():
        if p.name == name:
            return p
    known = ", ".join(p.name for p in default_projections())
    raise UnknownProjection(f"unknown projection {name!r}; known projections: {known}")
