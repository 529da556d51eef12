"""What a run asks its models for, and what it makes of the least an answer may be.

A structured output is checked by its JSON Schema (sent to the provider) and by msgspec. A rule the code checks
but the schema does not carry would pause runs: a provider answering the least its schema allows would fail the
same step at every retry. So every rule is either in the schema (then a reply that breaks it is asked for again
with the validation error, like any invalid output) or repaired here, deterministically:

* **the outline** has 1 to :data:`~openmaic.courses.schema.MAX_SCENES` scenes (schema); a blank title becomes
  the scene's goal, else "Scene <n>"; a media request without a prompt is dropped, and a repeated or malformed
  element id is renamed (repair);
* **a scene's content** is asked for as its kind's own type (``Slide``, ``QuizOutput`` with at least one
  question, ``Interactive``), so it can never be of another kind or a quiz without questions (schema);
* **the roster** (``agents: auto``): blank ids get ``agent-<n>``, repeated ids a suffix, blank names the role's
  word; without a teacher the first agent leads; with no agent at all the built-in teacher stands in (repair);
* **a scene's actions**: an action by an agent outside the roster is the lead's; no action at all becomes the
  lead presenting the scene's content, its title and then each bullet or question (repair).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic.courses.schema import (
    ELEMENT_ID, AgentProfile, Interactive, OutlineItem, Quiz, QuizOutput, SceneAction, SceneActions, SceneContent,
    SceneKind, Slide,
)  # fmt: skip
from openmaic.models.types import Message
from openmaic.steps.roster import BUILTIN_AGENTS

__all__ = ["lead_of", "repair_actions", "repair_outline", "repair_roster", "write_content"]

_CONTENT_TYPES: dict[str, type[Any]] = {"slide": Slide, "quiz": QuizOutput, "interactive": Interactive}

_ROLE_NAMES = {"teacher": "Teacher", "assistant": "Assistant", "classmate": "Classmate"}
_BUILTIN_TEACHER = BUILTIN_AGENTS["default-1"].profile()
"""Who leads a course whose roster came back empty."""


def repair_outline(items: Sequence[OutlineItem]) -> list[OutlineItem]:
    """The outline with every scene titled, and media requests with a prompt and an element id that is unique
    in the outline and safe in a URL (a repeated or malformed id gets ``gen_<kind>_<n>``)."""
    out = []
    seen: set[str] = set()
    counts = {"image": 0, "video": 0}
    for n, item in enumerate(items, start=1):
        title = " ".join(item.title.split()) or " ".join(item.goal.split()[:8]) or f"Scene {n}"
        media = []
        for request in item.media:
            prompt = " ".join(request.prompt.split())
            if not prompt:
                continue
            counts[request.kind] += 1
            element_id = request.element_id
            if element_id in seen or not ELEMENT_ID.match(element_id):
                element_id = f"gen_{'img' if request.kind == 'image' else 'vid'}_{counts[request.kind]}"
                while element_id in seen:
                    element_id += "_"
            seen.add(element_id)
            media.append(msgspec.structs.replace(request, prompt=prompt, element_id=element_id))
        out.append(msgspec.structs.replace(item, title=title, media=media))
    return out


async def write_content(provider: Any, model: str, messages: list[Message], kind: SceneKind) -> SceneContent:
    """The content of a scene of ``kind``, asked for as that kind's own type."""
    answer = await provider.complete(model, messages, _CONTENT_TYPES[kind])
    if kind == "quiz":
        return SceneContent(kind="quiz", quiz=Quiz(title=answer.title, questions=list(answer.questions)))
    return SceneContent(kind=kind, **{kind: answer})


def repair_roster(agents: Sequence[AgentProfile]) -> list[AgentProfile]:
    """A roster with unique non-blank ids, names, and exactly one lead teacher at its head when none was cast."""
    out: list[AgentProfile] = []
    seen: set[str] = set()
    for n, agent in enumerate(agents, start=1):
        ident = agent.id.strip() or f"agent-{n}"
        base, k = ident, 2
        while ident in seen:
            ident, k = f"{base}-{k}", k + 1
        seen.add(ident)
        name = " ".join(agent.name.split()) or _ROLE_NAMES[agent.role]
        out.append(msgspec.structs.replace(agent, id=ident, name=name, persona=agent.persona.strip()))
    if not out:
        return [_BUILTIN_TEACHER]
    if not any(a.role == "teacher" for a in out):
        out[0] = msgspec.structs.replace(out[0], role="teacher")
    return out


def lead_of(agents: Sequence[AgentProfile]) -> str:
    """The id of the agent who presents: the first teacher, else the first agent, else the built-in teacher."""
    lead = next((a for a in agents if a.role == "teacher"), agents[0] if agents else _BUILTIN_TEACHER)
    return lead.id


def _presentation(content: SceneContent | None, lead: str) -> list[SceneAction]:
    lines: list[str] = []
    if content is not None and content.slide is not None:
        lines = [content.slide.title, *content.slide.bullets]
    elif content is not None and content.quiz is not None:
        lines = [content.quiz.title, *(q.question for q in content.quiz.questions)]
    elif content is not None and content.interactive is not None:
        lines = [content.interactive.title, content.interactive.instructions]
    lines = [" ".join(line.split()) for line in lines if line.strip()] or ["Let's begin."]
    return [SceneAction(kind="speech", agent_id=lead, text=line) for line in lines]


def repair_actions(
    actions: SceneActions, agents: Sequence[AgentProfile], content: SceneContent | None = None
) -> SceneActions:
    """Actions every one of which an agent of the roster performs; never empty."""
    lead = lead_of(agents)
    if not actions.actions:
        return SceneActions(actions=_presentation(content, lead))
    known = {a.id for a in agents}
    if all(a.agent_id in known for a in actions.actions):
        return actions
    # An action by an agent that is not in the roster would have nobody to perform it: the lead takes it.
    return SceneActions(
        actions=[a if a.agent_id in known else msgspec.structs.replace(a, agent_id=lead) for a in actions.actions]
    )
