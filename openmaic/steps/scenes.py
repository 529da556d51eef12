"""The outline, agents, scene-content and scene-actions steps, as every kind of session runs them.

Each routes its model slot through the owner's settings (``course.outline``, ``course.agents``,
``course.content.<type>``, ``course.actions``; with no owner, the server's own), or to the model the run chose
for that slot (``RunInput.models``), sends the step's prompt
(:mod:`openmaic.steps.prompts`) as a plain text turn, and makes the format's value of the reply
(:mod:`openmaic.steps.outputs`, :mod:`openmaic.steps.contents`). A reply that cannot be made valid is asked for
again, showing the model what was wrong, at most :data:`ASKS` times in all; then the step fails with
``OutputInvalid`` naming the problem. Each returns the provider it used beside its result, so that a caller which
records model fallbacks (a run's ``fallback_events``) can.

Raises ``ProviderError`` (``OutputInvalid`` when the reply cannot be made valid), ``MissingModel`` /
``MissingApiKey`` when the slot cannot run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

from openmaic.courses import format as fmt
from openmaic.models.choices import with_choice
from openmaic.models.errors import OutputInvalid
from openmaic.models.types import AssistantMessage, Image, Message, UserMessage
from openmaic.steps import prompts
from openmaic.steps.brief import ResearchSource, RunInput
from openmaic.steps.contents import read_interactive, read_quiz, read_slide
from openmaic.steps.outputs import OutlineAnswer, preset_roster, read_actions, read_agents, read_outline
from openmaic.steps.prompts import CourseBrief

__all__ = ["ASKS", "CourseBrief", "cast_agents", "plan_outline", "summarize", "write_scene_actions",
           "write_scene_content"]

ASKS = 3
T = TypeVar("T")


def _ignore(_text: str) -> None:
    pass


async def route(models: Any, owner: str, slot: str, inp: RunInput) -> tuple[Any, str]:
    """The provider and model of ``slot``: the run's choice for it (``inp.models``) over the owner's settings."""
    choice = inp.models.get(slot)
    if owner:
        return await models.for_owner(owner, slot, choice=choice)
    return models.for_slot(slot, workspace=with_choice(None, slot, choice) if choice else None)


async def ask(provider: Any, model: str, messages: list[Message], read: Callable[[str], T], *,
              on_delta: Callable[[str], None] = _ignore, on_retry: Callable[[], None] | None = None) -> T:
    """``read`` of the model's reply to ``messages``; an invalid reply is asked for again (see the module doc)."""
    history = list(messages)
    for attempt in range(1, ASKS + 1):
        turn = await provider.stream_turn(model, history, [], on_delta=on_delta, on_retry=on_retry)
        try:
            return read(turn.text)
        except OutputInvalid as exc:
            if attempt == ASKS:
                raise
            if on_retry is not None:
                on_retry()
            history += [AssistantMessage(text=turn.text[:20_000]),
                        UserMessage(text=f"That answer could not be used: {exc.message}. Answer again, following "
                                         "the format exactly.")]
    raise AssertionError("unreachable")


async def plan_outline(models: Any, owner: str, inp: RunInput, materials: str, images: Sequence[Image],
                       research: Sequence[ResearchSource], *, salt: str, image_generation: bool,
                       video_generation: bool, on_delta: Callable[[str], None] = _ignore,
                       on_retry: Callable[[], None] | None = None) -> tuple[Any, OutlineAnswer]:
    """``(provider, outline)`` planned by the ``course.outline`` slot."""
    provider, model = await route(models, owner, "course.outline", inp)
    messages = prompts.outline_messages(inp, materials, images, research, image_generation=image_generation,
                                        video_generation=video_generation)
    answer = await ask(provider, model, messages, lambda t: read_outline(
        t, salt=salt, image_generation=image_generation, video_generation=video_generation),
        on_delta=on_delta, on_retry=on_retry)
    return provider, answer


async def cast_agents(models: Any, owner: str, inp: RunInput, course: CourseBrief,
                      ) -> tuple[Any, list[fmt.AgentConfig]]:
    """``(provider, roster)``: the classroom's agents cast by the ``course.agents`` slot; the preset agents when
    the reply is not a usable roster (OpenMAIC does the same)."""
    provider, model = await route(models, owner, "course.agents", inp)
    turn = await provider.stream_turn(model, prompts.agents_messages(inp, course), [], on_delta=_ignore)
    agents = read_agents(turn.text)
    chosen = inp.agents.preset_agent_ids
    return provider, agents if agents is not None else preset_roster(chosen or None) if chosen else preset_roster()


def media_of(outline: fmt.SceneOutline) -> list[dict[str, Any]]:
    """The media refs a slide may place, as its brief lists them."""
    return [{"ref": m.elementId, "type": m.type, "prompt": m.prompt,
             "aspectRatio": m.aspectRatio if isinstance(m.aspectRatio, str) else "16:9"}
            for m in outline.mediaGenerations or []]


async def write_scene_content(models: Any, owner: str, inp: RunInput, course: CourseBrief, index: int,
                              materials: str = "", teacher: fmt.AgentConfig | None = None,
                              ) -> tuple[Any, fmt.SceneContent]:
    """``(provider, content)`` of scene ``index``, from the provider routed for its type."""
    outline = course.outlines[index]
    provider, model = await route(models, owner, f"course.content.{outline.type}", inp)
    media = media_of(outline)
    messages = prompts.content_messages(inp, course, index, materials, media=media, teacher=teacher)
    if outline.type == "quiz":
        return provider, await ask(provider, model, messages, read_quiz)
    if outline.type == "interactive":
        widget = outline.widgetType if isinstance(outline.widgetType, str) else None
        return provider, await ask(provider, model, messages, lambda t: read_interactive(t, widget))
    refs = {m["ref"]: m["type"] for m in media}
    return provider, await ask(provider, model, messages, lambda t: read_slide(t, refs))


def _summary(e: Any) -> str:
    if isinstance(e, fmt.TextElement | fmt.ShapeElement):
        html = e.content if isinstance(e, fmt.TextElement) else (e.text.content if e.text else "")
        return " ".join(re.sub(r"<[^>]+>", " ", html).split())[:60]
    if isinstance(e, fmt.LatexElement):
        return e.latex[:60]
    if isinstance(e, fmt.ChartElement):
        return f"{e.chartType} chart"
    if isinstance(e, fmt.ImageElement | fmt.VideoElement):
        return "picture" if isinstance(e, fmt.ImageElement) else "video"
    return e.type


def summarize(content: fmt.SceneContent) -> dict[str, Any]:
    """What the actions step is told of a scene's content: its elements, its questions or its widget."""
    if isinstance(content, fmt.SlideContent):
        return {"elements": [{"id": e.id, "type": e.type, "summary": _summary(e)} for e in content.canvas.elements]}
    if isinstance(content, fmt.QuizContent):
        return {"questions": [{"id": q.id, "type": q.type, "question": q.question} for q in content.questions]}
    if isinstance(content, fmt.InteractiveContent):
        page = content.html if isinstance(content.html, str) else ""
        selectors = sorted({f"#{m}" for m in re.findall(r'\bid=["\']([A-Za-z][\w-]*)["\']', page)} |
                           {f'[data-step-id="{m}"]' for m in re.findall(r'data-step-id=["\']([^"\']+)["\']', page)})
        return {"widget": {"type": content.widgetType if isinstance(content.widgetType, str) else "simulation",
                           "config": content.widgetConfig if isinstance(content.widgetConfig, dict) else {},
                           "selectors": selectors[:40]}}
    return {}


async def write_scene_actions(models: Any, owner: str, inp: RunInput, course: CourseBrief, index: int,
                              scene: fmt.Scene, agents: Sequence[fmt.AgentConfig], previous_speech: str = "",
                              ) -> tuple[Any, list[fmt.Action]]:
    """``(provider, actions)``: the script of ``scene`` (scene ``index`` of the outline)."""
    provider, model = await route(models, owner, "course.actions", inp)
    summary = summarize(scene.content)
    messages = prompts.actions_messages(inp, course, index, agents=agents, previous_speech=previous_speech,
                                        **summary)
    outline = course.outlines[index]
    turn = await provider.stream_turn(model, messages, [], on_delta=_ignore)
    # A script that parses to nothing is not asked for again (OpenMAIC neither): the default script stands in.
    return provider, read_actions(turn.text, scene, agents, outline=outline, language=inp.language)
