"""Scene content for ``generate_scene``: the scene-content step every kind of session calls
(:func:`openmaic.steps.scenes.write_scene_content`), given the brief a Pro session's course makes.

One structured model call on slot ``course.content.<kind>`` with the step's prompt (the scene in the context of the
whole outline), returning a :class:`SceneContent` of the scene's kind (asked for as that kind's own type).
"""

from __future__ import annotations

from typing import Any

from openmaic.courses.events import CourseDocument, Scene
from openmaic.courses.schema import SceneContent
from openmaic.steps.brief import RunInput
from openmaic.steps.scenes import write_scene_content

NEW_COURSE_TITLE = "Untitled course"
"""The title of a course a workbench session creates (it has no requirement yet)."""


def _requirement(doc: CourseDocument, scene: Scene) -> str:
    # A course made in the workbench has no requirement: its title, once the user gave it one, says what it
    # is about; before that the scene's own title is the best subject there is.
    if doc.requirement.strip():
        return doc.requirement
    if doc.title.strip() and doc.title != NEW_COURSE_TITLE:
        return doc.title
    return scene.title


async def generate_scene_content(models: Any, doc: CourseDocument, scene: Scene, *, owner: str = "") -> SceneContent:
    """The content of ``scene`` (one of ``doc``'s scenes), from the provider routed for its kind.

    Raises ``ProviderError`` (``OutputInvalid`` when the reply does not fit the scene's type).
    """
    index = next(i for i, s in enumerate(doc.scenes) if s.id == scene.id)
    brief = RunInput(requirement=_requirement(doc, scene), language=doc.language)
    _provider, content = await write_scene_content(models, owner, brief, doc.title, doc.outline, index)
    return content
