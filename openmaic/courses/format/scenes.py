"""Scenes and their four kinds of content (OpenMAIC ``stage.ts``, ``interactive.ts``, ``pbl.ts``; format §3).

A scene's ``type`` names its content's kind and ``content.type`` must equal it. PBL projects and widget configs
are kept as JSON objects: their trees tolerate unknown members and the player writes learner progress back into
them, so typing them here would lose data.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from openmaic.courses.format.actions import Action
from openmaic.courses.format.base import UNSET, Num, Opt, Struct, TaggedStruct
from openmaic.courses.format.elements import Slide

__all__ = [
    "InteractiveContent", "MultiAgentConfig", "PblContent", "QUESTION_TYPES", "QuizContent", "QuizOption",
    "QuizQuestion", "SCENE_TYPES", "Scene", "SceneContent", "SceneType", "SlideContent", "WIDGET_TYPES",
    "WidgetType",
]  # fmt: skip

SceneType = Literal["slide", "quiz", "interactive", "pbl"]
SCENE_TYPES: tuple[str, ...] = ("slide", "quiz", "interactive", "pbl")
WidgetType = Literal["simulation", "diagram", "code", "game", "visualization3d", "procedural-skill"]
WIDGET_TYPES: tuple[str, ...] = ("simulation", "diagram", "code", "game", "visualization3d", "procedural-skill")
QuestionType = Literal["single", "multiple", "short_answer"]
QUESTION_TYPES: tuple[str, ...] = ("single", "multiple", "short_answer")


class SlideContent(TaggedStruct, kw_only=True, tag="slide"):
    """A slide page. ``schemaVersion`` is the app's slide-canvas version (it stamps 1; generators omit it)."""

    canvas: Slide
    schemaVersion: Opt[Num] = UNSET


class QuizOption(Struct, kw_only=True):
    """``label`` is shown; ``value`` (``A``, ``B`` …) is what ``answer`` holds."""

    label: str
    value: str


class QuizQuestion(Struct, kw_only=True):
    """One question; ``answer`` holds option values, never labels. ``points`` defaults to 1 when absent."""

    id: str
    type: QuestionType
    question: str
    options: Opt[list[QuizOption]] = UNSET
    answer: Opt[list[str]] = UNSET
    analysis: Opt[str] = UNSET
    commentPrompt: Opt[str] = UNSET
    hasAnswer: Opt[bool] = UNSET
    points: Opt[Num] = UNSET


class QuizContent(TaggedStruct, kw_only=True, tag="quiz"):
    questions: list[QuizQuestion]


class InteractiveContent(TaggedStruct, kw_only=True, tag="interactive"):
    """A widget page: ``html`` (a complete document shown through ``srcdoc``) or ``url``."""

    html: Opt[str] = UNSET
    url: Opt[str] = UNSET
    widgetType: Opt[WidgetType] = UNSET
    widgetConfig: Opt[dict[str, Any]] = UNSET


class PblContent(TaggedStruct, kw_only=True, tag="pbl"):
    """A project: ``projectV2`` (the current project tree) or the retired ``projectConfig``."""

    projectV2: Opt[dict[str, Any]] = UNSET
    projectConfig: Opt[dict[str, Any]] = UNSET


SceneContent: TypeAlias = SlideContent | QuizContent | InteractiveContent | PblContent


class MultiAgentConfig(Struct, kw_only=True):
    enabled: bool
    agentIds: list[str]
    directorPrompt: Opt[str] = UNSET


class Scene(Struct, kw_only=True):
    """One page of the course. ``outlineId`` is the app's extra (the outline the scene came from)."""

    id: str
    stageId: str
    type: SceneType
    title: str
    order: Num
    content: SceneContent
    actions: Opt[list[Action]] = UNSET
    whiteboards: Opt[list[Slide]] = UNSET
    multiAgent: Opt[MultiAgentConfig] = UNSET
    createdAt: Opt[Num] = UNSET
    updatedAt: Opt[Num] = UNSET
    outlineId: Opt[str] = UNSET
