"""OpenMAIC's short-answer grading route, ``POST /api/quiz-grade``, answered by the caller's ``classroom`` model slot.

``{question, userAnswer, points?, commentPrompt?, language?}`` → ``{success, score, comment}``: the score within
0…``points`` (default 1), the grader's comment in the learner's language (:mod:`openmaic.steps.tutoring`). OpenMAIC's
quiz view counts an answer right at 80 % of its points, and shows the comment beside the question's analysis.

Refusals: a missing or empty question or answer, points that are not a positive number, or a text past its bound is
400 (``{"error": {code, message, details}}``); a slot that cannot run is 400 ``MISSING_MODEL`` /
``MISSING_API_KEY``; an owner with ``limits.classroom_calls_per_owner`` classroom model calls running is 429 (the
key named); a model that fails, or answers no score, is 502. Nothing is stored: the learner's answer and
its grade are the quiz attempt's runtime records, which the page writes (:mod:`openmaic.api.persistence_runtime`).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from quart import Blueprint

from openmaic import errors
from openmaic.api import classroom_calls
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import Success, Wire
from openmaic.steps.tutoring import grade_messages, parse_grade

__all__ = ["CLASSROOM_SLOT", "bp", "classroom_model"]

bp = Blueprint("quiz_grade", __name__)

CLASSROOM_SLOT = "classroom"

Text = Annotated[str, msgspec.Meta(max_length=8000)]


class GradeBody(Wire):
    question: Annotated[str, msgspec.Meta(max_length=4000)]
    user_answer: Text
    points: Annotated[float, msgspec.Meta(gt=0, le=1000)] = 1
    comment_prompt: Annotated[str, msgspec.Meta(max_length=4000)] | None = None
    """The question's grading rubric (OpenMAIC's ``commentPrompt``)."""
    language: Annotated[str, msgspec.Meta(max_length=35)] | None = None
    """The learner's language (a BCP-47 tag such as ``zh-CN``); the comment is written in it."""


class GradeAnswer(Success):
    score: float
    comment: str


async def classroom_model(call: Call) -> tuple[Any, str]:
    """The caller's ``classroom`` slot as ``(provider, model)``; 503 when this process has no model router."""
    if call.services.models is None:
        raise errors.ServiceUnavailable("model calls are not served by this process")
    return await call.services.models.for_owner(call.user, CLASSROOM_SLOT)


def required_text(value: str, name: str) -> str:
    """``value`` stripped; a 400 naming the field when nothing is left."""
    text = value.strip()
    if not text:
        raise errors.InvalidInput(f"{name} must not be empty", path=name)
    return text


@api_route(bp, "POST", "/api/quiz-grade", body=GradeBody, response=GradeAnswer, error_style="json",
           errors=(400, 429, 502, 503))
async def quiz_grade(call: Call) -> GradeAnswer:
    """Grade a short answer with your classroom model: a score within 0…points and a comment in your language."""
    b: GradeBody = call.body
    question = required_text(b.question, "question")
    answer = required_text(b.user_answer, "userAnswer")
    provider, model = await classroom_model(call)
    messages = grade_messages(question, answer, b.points, (b.comment_prompt or "").strip() or None, b.language)
    release = classroom_calls.admit(call.user, call.services.config.limits.classroom_calls_per_owner)
    try:
        turn = await provider.stream_turn(model, messages, [], on_delta=lambda _: None)
    finally:
        release()
    grade = parse_grade(turn.text, b.points)
    return GradeAnswer(score=grade.score, comment=grade.comment)
