"""Actions: a scene's playback script (OpenMAIC ``@openmaic/dsl`` ``action.ts``; format §4).

Every action has ``id`` and optional ``title``/``description`` (labels, never spoken) and is told apart by
``type``. The whiteboard and widget tags keep OpenMAIC's spelling (``wb_draw_text``, ``widget_setState``).
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from openmaic.courses.format.base import UNSET, Num, Opt, Struct, TaggedStruct
from openmaic.courses.format.elements import ChartData, ChartType

__all__ = [
    "ACTION_TYPES", "Action", "DiscussionAction", "LaserAction", "PlayVideoAction", "SpeechAction",
    "SpotlightAction", "WbClearAction", "WbCloseAction", "WbDeleteAction", "WbDrawChartAction", "WbDrawCodeAction",
    "WbDrawLatexAction", "WbDrawLineAction", "WbDrawShapeAction", "WbDrawTableAction", "WbDrawTextAction",
    "WbEditCodeAction", "WbOpenAction", "WbTableOutline", "WbTableTheme", "WidgetAnnotationAction",
    "WidgetHighlightAction", "WidgetRevealAction", "WidgetSetStateAction",
]  # fmt: skip


class _Action(TaggedStruct, kw_only=True):
    id: str
    title: Opt[str] = UNSET
    description: Opt[str] = UNSET


class SpotlightAction(_Action, kw_only=True, tag="spotlight"):
    """Dim the slide except one element (default ``dimOpacity`` 0.5)."""

    elementId: str
    dimOpacity: Opt[Num] = UNSET


class LaserAction(_Action, kw_only=True, tag="laser"):
    """Point at an element that has a height (default ``color`` ``#ff0000``)."""

    elementId: str
    color: Opt[str] = UNSET


class PlayVideoAction(_Action, kw_only=True, tag="play_video"):
    elementId: str


class SpeechAction(_Action, kw_only=True, tag="speech"):
    """What the teacher says. ``audioId`` names the narration's asset; ``audioUrl`` is the legacy transport
    member of the file-backed classroom payload (kept so a browser save loses nothing; never generated)."""

    text: str
    audioId: Opt[str] = UNSET
    audioInvalidated: Opt[bool] = UNSET
    voice: Opt[str] = UNSET
    speed: Opt[Num] = UNSET
    audioUrl: Opt[str] = UNSET


class WbOpenAction(_Action, kw_only=True, tag="wb_open"):
    pass


class WbDrawTextAction(_Action, kw_only=True, tag="wb_draw_text"):
    content: str
    x: Num
    y: Num
    elementId: Opt[str] = UNSET
    width: Opt[Num] = UNSET
    height: Opt[Num] = UNSET
    fontSize: Opt[Num] = UNSET
    color: Opt[str] = UNSET


class WbDrawShapeAction(_Action, kw_only=True, tag="wb_draw_shape"):
    shape: Literal["rectangle", "circle", "triangle"]
    x: Num
    y: Num
    width: Num
    height: Num
    elementId: Opt[str] = UNSET
    fillColor: Opt[str] = UNSET


class WbDrawChartAction(_Action, kw_only=True, tag="wb_draw_chart"):
    chartType: ChartType
    x: Num
    y: Num
    width: Num
    height: Num
    data: ChartData
    elementId: Opt[str] = UNSET
    themeColors: Opt[list[str]] = UNSET


class WbDrawLatexAction(_Action, kw_only=True, tag="wb_draw_latex"):
    latex: str
    x: Num
    y: Num
    elementId: Opt[str] = UNSET
    width: Opt[Num] = UNSET
    height: Opt[Num] = UNSET
    color: Opt[str] = UNSET


class WbTableOutline(Struct, kw_only=True):
    width: Num
    style: str
    color: str


class WbTableTheme(Struct, kw_only=True):
    color: str


class WbDrawTableAction(_Action, kw_only=True, tag="wb_draw_table"):
    """``data`` is rows of strings; row 0 is the header."""

    x: Num
    y: Num
    width: Num
    height: Num
    data: list[list[str]]
    elementId: Opt[str] = UNSET
    outline: Opt[WbTableOutline] = UNSET
    theme: Opt[WbTableTheme] = UNSET


class WbDrawLineAction(_Action, kw_only=True, tag="wb_draw_line"):
    """Absolute whiteboard coordinates (1000 × 563)."""

    startX: Num
    startY: Num
    endX: Num
    endY: Num
    elementId: Opt[str] = UNSET
    color: Opt[str] = UNSET
    width: Opt[Num] = UNSET
    style: Opt[Literal["solid", "dashed"]] = UNSET
    points: Opt[tuple[Literal["", "arrow"], Literal["", "arrow"]]] = UNSET


class WbDrawCodeAction(_Action, kw_only=True, tag="wb_draw_code"):
    """``code`` is the source with lines separated by ``\\n``."""

    language: str
    code: str
    x: Num
    y: Num
    elementId: Opt[str] = UNSET
    width: Opt[Num] = UNSET
    height: Opt[Num] = UNSET
    fileName: Opt[str] = UNSET


class WbEditCodeAction(_Action, kw_only=True, tag="wb_edit_code"):
    elementId: str
    operation: Literal["insert_after", "insert_before", "delete_lines", "replace_lines"]
    lineId: Opt[str] = UNSET
    lineIds: Opt[list[str]] = UNSET
    content: Opt[str] = UNSET


class WbClearAction(_Action, kw_only=True, tag="wb_clear"):
    pass


class WbDeleteAction(_Action, kw_only=True, tag="wb_delete"):
    elementId: str


class WbCloseAction(_Action, kw_only=True, tag="wb_close"):
    pass


class DiscussionAction(_Action, kw_only=True, tag="discussion"):
    """Open a discussion on ``topic``, started by ``agentId`` (a student of the roster); the last action."""

    topic: str
    prompt: Opt[str] = UNSET
    agentId: Opt[str] = UNSET


class WidgetHighlightAction(_Action, kw_only=True, tag="widget_highlight"):
    target: str
    content: Opt[str] = UNSET


class WidgetSetStateAction(_Action, kw_only=True, tag="widget_setState"):
    state: dict[str, Any]
    content: Opt[str] = UNSET


class WidgetAnnotationAction(_Action, kw_only=True, tag="widget_annotation"):
    target: str
    content: Opt[str] = UNSET


class WidgetRevealAction(_Action, kw_only=True, tag="widget_reveal"):
    target: str
    content: Opt[str] = UNSET


Action: TypeAlias = (
    SpotlightAction | LaserAction | PlayVideoAction | SpeechAction | WbOpenAction | WbDrawTextAction
    | WbDrawShapeAction | WbDrawChartAction | WbDrawLatexAction | WbDrawTableAction | WbDrawLineAction
    | WbDrawCodeAction | WbEditCodeAction | WbClearAction | WbDeleteAction | WbCloseAction | DiscussionAction
    | WidgetHighlightAction | WidgetSetStateAction | WidgetAnnotationAction | WidgetRevealAction
)  # fmt: skip
ACTION_TYPES: tuple[str, ...] = (
    "spotlight", "laser", "play_video", "speech", "wb_open", "wb_draw_text", "wb_draw_shape", "wb_draw_chart",
    "wb_draw_latex", "wb_draw_table", "wb_draw_line", "wb_draw_code", "wb_edit_code", "wb_clear", "wb_delete",
    "wb_close", "discussion", "widget_highlight", "widget_setState", "widget_annotation", "widget_reveal",
)  # fmt: skip
