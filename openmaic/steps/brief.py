"""What the steps are asked for: a run's input (the requirement, language, learner, agents, voice) and what research
found, as plain structs that every kind of session hands to the step functions.

A generation run stores its input in ``run.created`` (:mod:`openmaic.runs.events` names these types too); a Pro
session builds a :class:`RunInput` from its course (see :mod:`openmaic.workbench.content`). The structs carry no
tag: they are stored nested in events, so moving their definition changes no stored byte.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["AgentsChoice", "LearnerProfile", "ResearchSource", "RunInput", "Voice"]


class AgentsChoice(msgspec.Struct, frozen=True, kw_only=True):
    """Who teaches: ``auto`` lets the ``course.agents`` slot cast the classroom (from ``preset_agent_ids`` when
    given); ``preset`` casts ``agent_ids`` as they are."""

    mode: Literal["auto", "preset"] = "auto"
    agent_ids: list[str] = []
    preset_agent_ids: list[str] = []


class LearnerProfile(msgspec.Struct, frozen=True, kw_only=True):
    nickname: str = ""
    bio: str = ""


class Voice(msgspec.Struct, frozen=True, kw_only=True):
    provider_id: str
    voice_id: str
    speed: float | None = None


class RunInput(msgspec.Struct, frozen=True, kw_only=True):
    """What a caller asked for. No keys or URLs: those come only from the server's config; a model only as one of
    those the owner's settings allow for a slot (``models``)."""

    requirement: str
    material_ids: list[str] = []
    language: str = "en"
    agents: AgentsChoice = AgentsChoice()
    learner_profile: LearnerProfile = LearnerProfile()
    outline_review: Literal["wait", "auto", "countdown"] = "wait"
    interactive: bool = False
    task_engine: bool = False
    voice: Voice | None = None
    enable_web_search: bool = True
    """Whether the research step searches the web (when the owner's settings give a web search slot); runs
    started before the choice existed searched whenever they could."""
    models: dict[str, str] = {}
    """The model chosen for a slot (``{"course.outline": "provider:model"}``) instead of the one the owner's
    settings assign; a slot left out follows the settings (:mod:`openmaic.models.choices`). A new field with a
    default: ``run.created`` events written before it read as "every slot as in the settings"."""


class ResearchSource(msgspec.Struct, frozen=True, kw_only=True):
    """One web search result the research step found."""

    title: str
    url: str
    content: str = ""
