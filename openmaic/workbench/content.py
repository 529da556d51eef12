"""A scene written for the Pro session's tools (``add_scene``, ``generate_scene``): the same scene-content and
scene-actions steps a run calls (:mod:`openmaic.steps.scenes`), given the brief a Pro session's course makes.

A scene is written whole, content and script, from its outline entry (its title, description and key points) in
the context of the whole course, so a scene a Pro session adds plays like one a run wrote.
"""

from __future__ import annotations

from typing import Any

import msgspec

from openmaic.courses import format as fmt
from openmaic.courses.events import CourseDocument
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


async def write_scene(models: Any, doc: CourseDocument, outline: fmt.SceneOutline, *, position: int,
                      scene_id: str, stage_id: str, owner: str = "") -> fmt.Scene:
    """The scene ``outline`` describes, written whole (content, then its script), to stand at ``position`` of
    ``doc``'s scenes. Raises ``ProviderError`` when a step's reply cannot be made valid."""
    outlines = [outline_of(doc, s) for s in doc.scenes]
    at = max(0, min(position, len(outlines)))
    outlines.insert(at, msgspec.structs.replace(outline, order=at + 1))
    course = _course(doc, outlines)
    brief = RunInput(requirement=_requirement(doc, outline), language=doc.language)
    teacher = next((a for a in doc.agents if a.role == "teacher"), None)
    _provider, content = await write_scene_content(models, owner, brief, course, at, teacher=teacher)
    scene = fmt.Scene(id=scene_id, stageId=stage_id, type=content.type, title=outline.title,  # type: ignore[arg-type]
                      order=at + 1, content=content)
    _provider, actions = await write_scene_actions(models, owner, brief, course, at, scene, list(doc.agents))
    return msgspec.structs.replace(scene, actions=actions)
