"""The demo provider's course writer, a pure function of what it is asked.

``answer(messages)`` answers a generation brief (the JSON object after the last ``Brief (JSON):`` line of the
last user message): the outline, the agents, a slide, a quiz, an interactive page or a scene's actions, in the
requirement's language and pitched at its audience. The structured-output functions of the earlier pipeline
(``outline``, ``scene_content``, ``roster``, …) stay importable from here, from ``legacy``, until nothing
calls them.
"""

from openmaic.models.demo_course.answer import answer, answer_brief
from openmaic.models.demo_course.brief import MARKER, has_brief, read_brief
from openmaic.models.demo_course.legacy import (
    interactive,
    outline,
    quiz,
    read_prompt,
    roster,
    scene_actions,
    scene_content,
    seed,
    slide,
    title_case,
    topic_of,
    wants_interactive,
)

__all__ = [
    "MARKER",
    "answer",
    "answer_brief",
    "has_brief",
    "interactive",
    "outline",
    "quiz",
    "read_brief",
    "read_prompt",
    "roster",
    "scene_actions",
    "scene_content",
    "seed",
    "slide",
    "title_case",
    "topic_of",
    "wants_interactive",
]
