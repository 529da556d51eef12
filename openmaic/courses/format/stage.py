"""The stage, its agents, and the whole document (OpenMAIC ``stage.ts``, ``version.ts``; format §1–§2).

``Document`` is the aggregate a store keeps: ``stage``, ``scenes``, the opaque ``outline`` and the root
``dslVersion`` stamp. The stamp is always written (a document leaves this process stamped).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from openmaic.courses.format.base import UNSET, Num, Opt, Struct
from openmaic.courses.format.elements import ElementOutline, Shadow, Theme, Whiteboard
from openmaic.courses.format.scenes import Scene

__all__ = [
    "AGENT_AVATARS", "AGENT_COLORS", "AgentConfig", "DEFAULT_THEME", "DSL_VERSION", "Document", "Stage",
    "VIEWPORT_RATIO", "VIEWPORT_SIZE", "VideoManifestEntry", "VoiceConfig", "VoiceDesign",
]  # fmt: skip

DSL_VERSION = "0.2.0"
"""The document shape this code reads and writes (the root ``dslVersion``)."""

VIEWPORT_SIZE = 1000
"""Width of the slide design canvas in design px."""
VIEWPORT_RATIO = 0.5625
"""Height ÷ width of the slide design canvas (16:9)."""

DEFAULT_THEME = Theme(
    backgroundColor="#ffffff",
    themeColors=["#5b9bd5", "#ed7d31", "#a5a5a5", "#ffc000", "#4472c4"],
    fontColor="#333333",
    fontName="Microsoft YaHei",
    outline=ElementOutline(color="#d14424", width=2, style="solid"),
    shadow=Shadow(h=0, v=0, blur=10, color="#000000"),
)
"""The theme OpenMAIC's slide generator gives every slide."""

AGENT_COLORS: tuple[str, ...] = (
    "#3b82f6", "#10b981", "#f59e0b", "#ec4899", "#06b6d4", "#8b5cf6",
    "#f97316", "#14b8a6", "#e11d48", "#6366f1", "#84cc16", "#a855f7",
)  # fmt: skip
"""The palette generated agents cycle through, by roster index."""

AGENT_AVATARS: tuple[str, ...] = (
    "/avatars/teacher.png", "/avatars/assist.png", "/avatars/curious.png", "/avatars/thinker.png",
    "/avatars/note-taker.png", "/avatars/teacher-2.png", "/avatars/assist-2.png", "/avatars/curious-2.png",
    "/avatars/thinker-2.png", "/avatars/note-taker-2.png",
)  # fmt: skip
"""The app-bundled avatars generated agents cycle through."""


class VoiceConfig(Struct, kw_only=True):
    """A bound TTS voice."""

    providerId: str
    voiceId: str


class VoiceDesign(Struct, kw_only=True):
    identity: str
    texture: str
    delivery: str


class AgentConfig(Struct, kw_only=True):
    """One agent of the roster; ``role`` is ``teacher``, ``assistant`` or ``student`` by convention."""

    id: str
    name: str
    role: str
    persona: str
    avatar: str
    color: str
    priority: Num
    voiceConfig: Opt[VoiceConfig] = UNSET
    voiceDesign: Opt[VoiceDesign] = UNSET


class VideoManifestEntry(Struct, kw_only=True):
    """A generated video's request, keyed in ``stage.videoManifest`` by the ref its element's ``mediaRef`` holds."""

    type: Literal["video"]
    prompt: str
    aspectRatio: Opt[str] = UNSET


class Stage(Struct, kw_only=True):
    """Course-wide metadata; timestamps are epoch milliseconds."""

    id: str
    name: str
    createdAt: Num
    updatedAt: Num
    description: Opt[str] = UNSET
    languageDirective: Opt[str] = UNSET
    style: Opt[str] = UNSET
    whiteboard: Opt[list[Whiteboard]] = UNSET
    videoManifest: Opt[dict[str, VideoManifestEntry]] = UNSET
    agentIds: Opt[list[str]] = UNSET
    generatedAgentConfigs: Opt[list[AgentConfig]] = UNSET
    interactiveMode: Opt[bool] = UNSET
    taskEngineMode: Opt[bool] = UNSET


class Document(msgspec.Struct, frozen=True, kw_only=True):
    """A whole course: the stage, its scenes, the opaque ``outline`` and the root version stamp.

    Not ``omit_defaults``: ``dslVersion`` is written even at its default.
    """

    stage: Stage
    scenes: list[Scene]
    outline: Any = UNSET
    dslVersion: str = DSL_VERSION
