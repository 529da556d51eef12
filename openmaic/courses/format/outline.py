"""What generation intends: scene outlines and their media requests (format §7.1, §5.2).

The document's ``outline`` member is opaque to OpenMAIC's stores; the app writes
``{"outlines": [SceneOutline…], "generationComplete"?, "createdAt", "updatedAt"}`` (:class:`OutlineSnapshot`).
"""

from __future__ import annotations

from typing import Any, Literal

from openmaic.courses.format.base import UNSET, Num, Opt, Struct
from openmaic.courses.format.scenes import SceneType, WidgetType

__all__ = ["ASPECT_RATIOS", "MediaGeneration", "OutlineSnapshot", "QuizConfig", "SceneOutline"]

AspectRatio = Literal["16:9", "4:3", "1:1", "9:16"]
ASPECT_RATIOS: tuple[str, ...] = ("16:9", "4:3", "1:1", "9:16")


class MediaGeneration(Struct, kw_only=True):
    """A picture or video to generate; ``elementId`` is its ref (``gen_img_…``/``gen_vid_…``)."""

    type: Literal["image", "video"]
    prompt: str
    elementId: str
    aspectRatio: Opt[AspectRatio] = UNSET
    style: Opt[str] = UNSET


class QuizConfig(Struct, kw_only=True):
    questionCount: Num
    difficulty: Literal["easy", "medium", "hard"]
    questionTypes: list[Literal["single", "multiple", "short_answer"]]


class SceneOutline(Struct, kw_only=True):
    """One planned scene."""

    id: str
    type: SceneType
    title: str
    description: str
    keyPoints: list[str]
    order: Num
    teachingObjective: Opt[str] = UNSET
    estimatedDuration: Opt[Num] = UNSET
    languageNote: Opt[str] = UNSET
    suggestedImageIds: Opt[list[str]] = UNSET
    mediaGenerations: Opt[list[MediaGeneration]] = UNSET
    quizConfig: Opt[QuizConfig] = UNSET
    widgetType: Opt[WidgetType] = UNSET
    widgetOutline: Opt[dict[str, Any]] = UNSET
    interactiveConfig: Opt[dict[str, Any]] = UNSET
    pblConfig: Opt[dict[str, Any]] = UNSET


class OutlineSnapshot(Struct, kw_only=True):
    """The shape the app writes into a document's ``outline``."""

    outlines: list[SceneOutline]
    createdAt: Num
    updatedAt: Num
    generationComplete: Opt[bool] = UNSET
