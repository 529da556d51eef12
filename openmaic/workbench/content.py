"""Scene content for ``generate_scene``: the classic pipeline's scene-content step, reused.

One structured model call on slot ``course.content.<kind>`` with the classic step's own prompt
(:func:`openmaic.runs.prompts.content_messages`: the scene in the context of the whole outline), returning a
:class:`SceneContent` of the scene's kind (asked for as that kind's own type, see :mod:`openmaic.runs.outputs`).
"""

from __future__ import annotations

from typing import Any

from openmaic.courses.events import CourseDocument, Scene
from openmaic.courses.schema import SceneContent
from openmaic.runs.events import RunInput
from openmaic.runs.outputs import write_content
from openmaic.runs.prompts import content_messages

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
    inp = RunInput(requirement=_requirement(doc, scene), language=doc.language)
    messages = content_messages(inp, doc.title, doc.outline, index, "")
    slot = f"course.content.{scene.kind}"
    provider, model = await models.for_owner(owner, slot) if owner else models.for_slot(slot)
    return await write_content(provider, model, messages, scene.kind)
