"""The slot tree: every product use that needs a model, as OpenMAIC 1.2 names them.

A slot is a use (``course.outline``); slots form one tree per capability and each root is the default for its
capability. A slot without an assignment inherits from its parent when it is resolved, so a parent's value is
the default for its whole subtree; an explicit ``null`` turns the subtree off (see
:mod:`openmaic.modelconfig.resolve`). ``configOnly`` slots are set in ``openmaic.yml`` only, never on the
Models page. ``requires`` lists what the resolved model must be able to do (``agent`` calls tools).

Pure data, imported by the configuration loader and the settings alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CAPABILITIES", "CHAT_CONTENT_SLOTS", "SLOTS", "Capability", "SlotDef", "is_slot", "lineage", "slot"]

Capability = Literal["chat", "tts", "asr", "image", "video", "webSearch", "document"]
CAPABILITIES: tuple[Capability, ...] = ("chat", "tts", "asr", "image", "video", "webSearch", "document")


@dataclass(frozen=True)
class SlotDef:
    """One slot: its id, what it needs, where it inherits from (``None`` for a capability root)."""

    id: str
    capability: Capability
    parent: str | None
    requires: tuple[str, ...] = ()
    config_only: bool = False


SLOTS: tuple[SlotDef, ...] = (
    SlotDef("llm", "chat", None),
    SlotDef("course.research", "chat", "llm"),
    SlotDef("course.outline", "chat", "llm"),
    SlotDef("course.agents", "chat", "llm"),
    SlotDef("course.content", "chat", "llm"),
    SlotDef("course.content.slide", "chat", "course.content"),
    SlotDef("course.content.quiz", "chat", "course.content"),
    SlotDef("course.content.interactive", "chat", "course.content"),
    SlotDef("course.content.pbl", "chat", "course.content"),
    SlotDef("course.actions", "chat", "llm"),
    SlotDef("classroom", "chat", "llm"),
    SlotDef("agent", "chat", "llm", requires=("toolCalling",)),
    SlotDef("agent.title", "chat", "agent", config_only=True),
    SlotDef("tts", "tts", None),
    SlotDef("asr", "asr", None),
    SlotDef("image", "image", None),
    SlotDef("video", "video", None),
    SlotDef("webSearch", "webSearch", None),
    SlotDef("document", "document", None),
)

CHAT_CONTENT_SLOTS = ("course.content.slide", "course.content.quiz", "course.content.interactive",
                      "course.content.pbl")  # fmt: skip
"""The per-kind scene content slots: a run needs at least one of them."""

_BY_ID = {s.id: s for s in SLOTS}


def is_slot(name: object) -> bool:
    """Whether ``name`` is a slot id."""
    return isinstance(name, str) and name in _BY_ID


def slot(name: str) -> SlotDef:
    """The slot ``name`` (``KeyError`` with the valid ids when unknown)."""
    try:
        return _BY_ID[name]
    except KeyError:
        raise KeyError(f"unknown slot {name!r}; valid slots: {', '.join(_BY_ID)}") from None


def lineage(name: str) -> list[str]:
    """The slot, then each ancestor up to its capability root."""
    out: list[str] = []
    current: str | None = name
    while current is not None:
        out.append(current)
        current = slot(current).parent
    return out
