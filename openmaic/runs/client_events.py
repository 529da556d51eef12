"""The run's client events: OpenMAIC's event vocabulary, as a view of the run's event log.

A client following a run (``GET /api/generation-runs/{id}/events``, the run's WebSocket) sees OpenMAIC's events
(``state``, ``step_started``, ``outline_item``, ``outline_ready``, ``scene_ready``, ``completed``, …), not the
log's. Each client event is the view of exactly one logged event and keeps its seq, so a client resumes from the
last seq it saw (``Last-Event-ID``) and gets every later client event once, in order. Logged events with no
client meaning — leases, admission, model output, the scene content a ``scene_ready`` announces — have no client
event, so client seqs have gaps.

The view is a function of the run's state *before* the event and the event (:func:`client_event`): an
``outline_confirmed`` says whether the outline was edited, a ``scene_ready`` names the scene's id, a
``step_retry`` counts the attempt. A reader folds the run up to where it starts (the snapshot fold) and evolves
the state with every event it passes, so a view read live and one read from the backlog are the same.

Names follow OpenMAIC: run state ``ended`` (older logs say ``stopped``), step ``material-analysis`` (the log's
``materials``), camelCase data.
"""

from __future__ import annotations

from typing import Any

from openmaic.events.core import SessionEnded
from openmaic.events.types import Event
from openmaic.runs.events import (
    RunAgentsSelected,
    RunCourseCreated,
    RunMaterialsExtracted,
    RunMediaState,
    RunOutlineConfirmed,
    RunOutlineItem,
    RunOutlineProposed,
    RunOutlineRestarted,
    RunResearchDone,
    RunSceneActions,
    RunSceneNarrated,
    RunStateChanged,
    RunStepCompleted,
    RunStepFailed,
    RunStepStarted,
)
from openmaic.runs.fold import RunState, evolve, scene_id
from openmaic.runs.views import media_view, outline_view_of, run_state, scene_outlines, wire_step

__all__ = ["CLIENT_EVENT_TYPES", "ClientView", "client_event"]

CLIENT_EVENT_TYPES = (
    "state", "step_started", "step_retry", "step_completed", "step_failed", "material_kinds", "research_sources",
    "outline_reset", "outline_item", "outline_ready", "outline_confirmed", "course_created", "agents",
    "scene_ready", "media", "completed", "ended",
)  # fmt: skip
"""Every type :func:`client_event` can answer (OpenMAIC's ``GENERATION_RUN_EVENT_TYPES`` that exist here)."""


def client_event(before: RunState, event: Event, *, max_attempts: int) -> tuple[str, dict[str, Any]] | None:
    """``(type, data)`` of the client event that ``event`` is, given the run's state before it; None when it has
    no client meaning. ``max_attempts`` is how often a failing step is tried before the run pauses."""
    match event:
        case RunStateChanged(state=state, step=step):
            return "state", {"state": run_state(state), "step": wire_step(step if step is not None else before.step)}
        case RunStepStarted(step=step):
            return "step_started", {"step": wire_step(step)}
        case RunStepFailed(step=step, error=error, will_retry=True):
            attempt = before.failures.get(step, 0) + 1
            return "step_retry", {"step": wire_step(step), "attempt": attempt, "maxAttempts": max_attempts,
                                  "reason": error}
        case RunStepFailed(step=step, error=error):
            return "step_failed", {"step": wire_step(step), "message": error}
        case RunStepCompleted(step=step):
            return "step_completed", {"step": wire_step(step)}
        case RunMaterialsExtracted(text=text, images=images, kinds=kinds):
            found = list(kinds) or [k for k, present in (("document", bool(text.strip())), ("image", bool(images)))
                                    if present]  # fmt: skip
            return "material_kinds", {"kinds": found}
        case RunOutlineRestarted():
            return "outline_reset", {}
        case RunOutlineItem(index=index, item=item, revision=revision):
            (outline,) = scene_outlines(before.course_id, revision, [item], start=index)
            return "outline_item", {"index": index, "outline": outline}
        case RunOutlineProposed(revision=revision):
            after = evolve(before, event, before.seq)
            return "outline_ready", {"revision": revision, "outline": outline_view_of(after)}
        case RunOutlineConfirmed(revision=revision, by=by):
            if before.confirmed_revision:
                return None  # a second confirmation changes nothing (the fold keeps the first)
            after = evolve(before, event, before.seq)
            return "outline_confirmed", {"revision": revision, "edited": revision != before.proposed_revision,
                                         "by": by, "outline": outline_view_of(after)}
        case RunCourseCreated(course_id=course_id):
            return "course_created", {"stageId": course_id}
        case RunAgentsSelected(agents=agents):
            return "agents", {"agents": list(agents), "agentIds": [a.id for a in agents]}
        case RunResearchDone(sources=sources):
            return "research_sources", {"sources": [{"title": x.title, "url": x.url, "content": x.content}
                                                    for x in sources]}
        case RunMediaState():
            return "media", media_view(event).to_dict()
        case RunSceneNarrated(index=index) | RunSceneActions(index=index) if (
            isinstance(event, RunSceneNarrated) == before.narrates
        ):
            # A scene is ready after its last step: narration, or its actions in a run logged before narration.
            # It carries the scene as the course holds it (OpenMAIC's scene; generated media are put in their
            # places when the classroom is read).
            after = evolve(before, event, before.seq)
            progress = after.scenes[index] if 0 <= index < len(after.scenes) else None
            data: dict[str, Any] = {"index": index,
                                    "sceneId": scene_id(before.course_id, before.confirmed_revision, index),
                                    "order": index + 1}
            if progress is not None and progress.content is not None:
                data["scene"] = after.scene(index, progress.content, progress.actions)
            return "scene_ready", data
        case SessionEnded(status=status):
            kind = "completed" if status == "completed" else "ended"
            return kind, {"stageId": before.course_id or None}
    return None


class ClientView:
    """Follows one run from a seq: maps each next event to its client event and advances the state."""

    def __init__(self, state: RunState, *, max_attempts: int) -> None:
        self.state = state
        self.max_attempts = max_attempts

    def next(self, event: Event, seq: int) -> tuple[str, dict[str, Any]] | None:
        """The client event of the event at ``seq`` (the one after the state's)."""
        out = client_event(self.state, event, max_attempts=self.max_attempts)
        self.state = evolve(self.state, event, seq)
        return out
