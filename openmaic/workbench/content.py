"""A scene written for the Pro session's tools (``add_scene``, ``generate_scene``): the same scene-content and
scene-actions steps a run calls (:mod:`openmaic.steps.scenes`), given the brief a Pro session's course makes.

A scene is written whole, content and script, from its outline entry (its title, description and key points) in
the context of the whole course, so a scene a Pro session adds plays like one a run wrote. A session has no model
choices of its own (OpenMAIC's Pro sessions take none): the steps use those of the run that made the course
(:func:`run_choices_of`), so a scene it adds is written by the models the teacher chose for that course, and
otherwise the owner's settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from openmaic.courses import format as fmt
from openmaic.courses.events import CourseCreated, CourseDocument
from openmaic.events.core import SessionCreated
from openmaic.events.log import EventLog
from openmaic.steps.brief import RunInput
from openmaic.steps.prompts import CourseBrief
from openmaic.steps.scenes import write_scene_actions, write_scene_content

NEW_COURSE_TITLE = "Untitled course"
"""The title of a course a workbench session creates (it has no requirement yet)."""


def _requirement(doc: CourseDocument, outline: fmt.SceneOutline) -> str:
    # A course made in the workbench has no requirement: its title, once the user gave it one, says what it
    # is about; before that the scene's own title is the best subject there is.
    if doc.requirement.strip():
        return doc.requirement
    if doc.title.strip() and doc.title != NEW_COURSE_TITLE:
        return doc.title
    return outline.title


def outline_of(doc: CourseDocument, scene: fmt.Scene) -> fmt.SceneOutline:
    """The scene's outline entry: the one it was written from, else one made from the scene itself."""
    known = doc.outlines.get(scene.id)
    if known is not None:
        return known
    return fmt.SceneOutline(id=scene.id, type=scene.type, title=scene.title, description="", keyPoints=[],
                            order=scene.order)


def _course(doc: CourseDocument, outlines: list[fmt.SceneOutline]) -> CourseBrief:
    return CourseBrief(title=doc.title, language_directive=doc.language_directive, outlines=tuple(outlines))


async def run_choices_of(log: EventLog, course_id: str, owner: str) -> dict[str, str]:
    """The model per slot the run that made ``owner``'s course chose (its input's ``models``); empty for a course
    no run made (a session's new course, a browser's save) or whose run chose none."""
    first = await log.read_stream(course_id, 0, 1)
    created = log.decode(first[0]) if first else None
    if not isinstance(created, CourseCreated) or not created.locked_by:
        return {}
    # The run that creates a course locks it for itself in the same transaction (openmaic.runs.service).
    opened = await log.read_stream(created.locked_by, 0, 1)
    run = log.decode(opened[0]) if opened else None
    if not isinstance(run, SessionCreated) or run.kind != "generation" or run.owner_id != owner:
        return {}
    chosen = run.input.get("models")
    if not isinstance(chosen, dict):
        return {}
    return {slot: ref for slot, ref in chosen.items() if isinstance(slot, str) and isinstance(ref, str) and ref}


async def write_scene(models: Any, doc: CourseDocument, outline: fmt.SceneOutline, *, position: int,
                      scene_id: str, stage_id: str, owner: str = "", choices: Mapping[str, str] = {}) -> fmt.Scene:
    """The scene ``outline`` describes, written whole (content, then its script), to stand at ``position`` of
    ``doc``'s scenes, each step on the model ``choices`` names for its slot (else the owner's settings). Raises
    ``ProviderError`` when a step's reply cannot be made valid."""
    outlines = [outline_of(doc, s) for s in doc.scenes]
    at = max(0, min(position, len(outlines)))
    outlines.insert(at, msgspec.structs.replace(outline, order=at + 1))
    course = _course(doc, outlines)
    brief = RunInput(requirement=_requirement(doc, outline), language=doc.language, models=dict(choices))
    teacher = next((a for a in doc.agents if a.role == "teacher"), None)
    _provider, content = await write_scene_content(models, owner, brief, course, at, teacher=teacher)
    scene = fmt.Scene(id=scene_id, stageId=stage_id, type=content.type, title=outline.title,  # type: ignore[arg-type]
                      order=at + 1, content=content)
    _provider, actions = await write_scene_actions(models, owner, brief, course, at, scene, list(doc.agents))
    return msgspec.structs.replace(scene, actions=actions)
