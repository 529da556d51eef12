"""The demo model's answer to a brief: JSON text, an HTML page for ``step: "interactive"``, or an agent's reply in
the classroom for ``step: "tutor"``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from openmaic.models.demo_course.actions import actions
from openmaic.models.demo_course.agents import agents
from openmaic.models.demo_course.brief import read_brief
from openmaic.models.demo_course.interactive import interactive
from openmaic.models.demo_course.outline import outline
from openmaic.models.demo_course.quiz import quiz
from openmaic.models.demo_course.slides import slide
from openmaic.models.demo_course.tutor import grade, tutor

_STEPS = {"outline": outline, "agents": agents, "slide": slide, "quiz": quiz, "actions": actions, "grade": grade}


def answer_brief(brief: dict[str, Any]) -> str:
    """The answer text for one brief; an unknown step is a ``ValueError`` naming the steps there are."""
    step = brief.get("step")
    if step == "interactive":
        return interactive(brief)
    if step == "tutor":
        return tutor(brief)
    make = _STEPS.get(step) if isinstance(step, str) else None
    if make is None:
        known = ", ".join(sorted([*_STEPS, "interactive", "tutor"]))
        raise ValueError(f"the brief's step {step!r} is not one the demo answers (expected one of: {known})")
    return json.dumps(make(brief), ensure_ascii=False, allow_nan=False)


def answer(messages: Sequence[Any]) -> str:
    """The text the demo model answers for the brief in ``messages`` (same messages, same answer).

    A message list without a brief is a ``ValueError``: callers check with ``brief.has_brief`` first.
    """
    brief = read_brief(messages)
    if brief is None:
        raise ValueError("the last user message carries no 'Brief (JSON):' line with a JSON object after it")
    return answer_brief(brief)
