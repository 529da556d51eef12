"""The demo provider's course writer, a pure function of what it is asked.

``answer(messages)`` answers a generation brief (the JSON object after the last ``Brief (JSON):`` line of the
last user message): the outline, the agents, a slide, a quiz, an interactive page or a scene's actions, in the
requirement's language and pitched at its audience.
"""

from openmaic.models.demo_course.answer import answer, answer_brief
from openmaic.models.demo_course.brief import MARKER, has_brief, read_brief
from openmaic.models.demo_course.topic import topic_of

__all__ = ["MARKER", "answer", "answer_brief", "has_brief", "read_brief", "topic_of"]
