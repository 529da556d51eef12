"""OpenMAIC's built-in classroom agents, in code: the roster a step casts from when none is given.

``default-1`` … ``default-6``: a teacher, an assistant and four students, read-only and updated with releases.
An owner's own agents live in the database (:mod:`openmaic.runs.agents`, which also resolves the ids a run names);
the steps need only these, e.g. the built-in teacher who leads a course whose roster came back empty
(:mod:`openmaic.steps.outputs`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from openmaic.courses import format as fmt

__all__ = ["BUILTIN_AGENTS", "SLIDE_ACTIONS", "WHITEBOARD_ACTIONS", "Agent", "VoiceConfig"]

WHITEBOARD_ACTIONS = ("wb_open", "wb_close", "wb_draw_text", "wb_draw_shape", "wb_draw_chart", "wb_draw_latex",
                      "wb_draw_table", "wb_draw_line", "wb_draw_code", "wb_edit_code", "wb_clear", "wb_delete")
SLIDE_ACTIONS = ("spotlight", "laser", "play_video")


class VoiceConfig(msgspec.Struct, frozen=True, kw_only=True):
    provider_id: str
    voice_id: str
    model_id: str | None = None


class Agent(msgspec.Struct, frozen=True, kw_only=True):
    """An agent as OpenMAIC's registry holds it."""

    id: str
    name: str
    role: str
    """``teacher``, ``assistant`` or ``student``."""
    persona: str = ""
    avatar: str = ""
    color: str = ""
    allowed_actions: list[str] = []
    priority: int = 5
    """1 to 10: who the director gives the floor to first."""
    voice_config: VoiceConfig | None = None
    voice_design: Any = None
    read_only: bool = False

    def config(self) -> fmt.AgentConfig:
        """What a run casts (and stores in its events): OpenMAIC's agent config."""
        out = fmt.AgentConfig(id=self.id, name=self.name, role=self.role, persona=self.persona,
                              avatar=self.avatar or "/avatars/teacher.png", color=self.color or "#3b82f6",
                              priority=self.priority)
        if self.voice_config is not None:
            out = msgspec.structs.replace(out, voiceConfig=fmt.VoiceConfig(
                providerId=self.voice_config.provider_id, voiceId=self.voice_config.voice_id))
        return out


def _builtin(n: int, name: str, role: str, avatar: str, color: str, priority: int, persona: str) -> Agent:
    actions = [*SLIDE_ACTIONS, *WHITEBOARD_ACTIONS] if role == "teacher" else list(WHITEBOARD_ACTIONS)
    return Agent(id=f"default-{n}", name=name, role=role, persona=persona, avatar=avatar, color=color,
                 allowed_actions=actions, priority=priority, read_only=True)


BUILTIN_AGENTS: dict[str, Agent] = {a.id: a for a in (
    _builtin(1, "AI teacher", "teacher", "/avatars/teacher.png", "#3b82f6", 10,
             "A patient teacher who explains with clear steps and concrete examples, checks understanding often "
             "and welcomes questions."),
    _builtin(2, "AI assistant", "assistant", "/avatars/assist.png", "#10b981", 7,
             "A teaching assistant who recaps each scene in a few words and answers follow-up questions."),
    _builtin(3, "Class clown", "student", "/avatars/clown.png", "#f59e0b", 4,
             "A classmate who lightens the mood with a joke, then asks the question everyone was afraid to ask."),
    _builtin(4, "Curious mind", "student", "/avatars/curious.png", "#ec4899", 5,
             "A classmate: curious and quick to ask for concrete examples."),
    _builtin(5, "Note taker", "student", "/avatars/note-taker.png", "#06b6d4", 5,
             "A classmate who sums up what was just said in tidy notes and asks when something is unclear."),
    _builtin(6, "Deep thinker", "student", "/avatars/thinker.png", "#8b5cf6", 6,
             "A classmate: a friendly sceptic who likes to test every claim."),
)}  # fmt: skip
"""The built-in agents, in order. Read-only; updated with releases."""
