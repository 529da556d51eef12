"""The agents, scene-content and scene-actions steps, as every kind of session runs them.

Each routes its model slot through the owner's settings (``course.agents``, ``course.content.<kind>``,
``course.actions``; with no owner, the server's own), sends the step's prompt (:mod:`openmaic.steps.prompts`)
and repairs what the reply may lack (:mod:`openmaic.steps.outputs`). Each returns the provider it used beside its
result, so that a caller which records model fallbacks (a run's ``fallback_events``) can.

Raises ``ProviderError`` (``OutputInvalid`` when the reply does not fit its type), ``MissingModel`` /
``MissingApiKey`` when the slot cannot run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openmaic.courses.schema import AgentProfile, AgentRoster, OutlineItem, SceneActions, SceneContent
from openmaic.steps import prompts
from openmaic.steps.brief import RunInput
from openmaic.steps.outputs import repair_actions, repair_roster, write_content

__all__ = ["cast_agents", "write_scene_actions", "write_scene_content"]


async def _route(models: Any, owner: str, slot: str) -> tuple[Any, str]:
    return await models.for_owner(owner, slot) if owner else models.for_slot(slot)


async def cast_agents(models: Any, owner: str, brief: RunInput, title: str,
                      outline: Sequence[OutlineItem]) -> tuple[Any, list[AgentProfile]]:
    """``(provider, roster)``: the classroom's agents cast by the ``course.agents`` slot for this course."""
    provider, model = await _route(models, owner, "course.agents")
    roster = await provider.complete(model, prompts.agents_messages(brief, title, list(outline)), AgentRoster)
    return provider, repair_roster(roster.agents)


async def write_scene_content(models: Any, owner: str, brief: RunInput, title: str, outline: Sequence[OutlineItem],
                              index: int, materials: str = "") -> tuple[Any, SceneContent]:
    """``(provider, content)`` of scene ``index`` of ``outline``, in the context of the whole outline, asked for as
    its kind's own type from the provider routed for that kind."""
    kind = outline[index].kind
    provider, model = await _route(models, owner, f"course.content.{kind}")
    messages = prompts.content_messages(brief, title, list(outline), index, materials)
    return provider, await write_content(provider, model, messages, kind)


async def write_scene_actions(models: Any, owner: str, brief: RunInput, title: str, item: OutlineItem,
                              content: SceneContent, agents: Sequence[AgentProfile]) -> tuple[Any, SceneActions]:
    """``(provider, actions)``: how the roster presents a scene, every action by an agent of ``agents``."""
    provider, model = await _route(models, owner, "course.actions")
    messages = prompts.actions_messages(brief, title, item, content, list(agents))
    return provider, repair_actions(await provider.complete(model, messages, SceneActions), agents, content)
