"""The run's research step (web search before the outline) and its narration steps (a clip per scene).

* ``research`` asks the ``webSearch`` slot about the requirement. No provider: the step records that it did
  nothing (``skipped``). A provider failure, or a slot that cannot be used, is recorded as the step's ``error`` and the run goes on without the
  context: research is an aid to the outline, never a reason to stop a course.
* ``narrate`` speaks each of a scene's speech actions with the ``tts`` slot and stores each clip in the owner's
  asset store as that speech's ``audioId``. No provider: no clips. A provider failure (or a ``tts`` slot that cannot be used:
  ``MissingModel`` / ``MissingApiKey``) propagates, so the step fails, is retried,
  and pauses the run like any step; ``retry`` then resumes at that step. A full asset store leaves the scene
  unvoiced (counted in the job's warning) rather than stopping the course. The run's ``voice`` (OpenMAIC's
  ``{providerId, voiceId, speed}``) is spoken with when its ``providerId`` names the provider serving the ``tts``
  slot (by its id or its preset's); a voice of another provider would be refused by this one, so the slot's
  provider then speaks with its own default voice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic.courses import format as fmt
from openmaic.media.assets import AssetQuotaExceeded, store_generated
from openmaic.media.slots import MediaRouter
from openmaic.models.errors import ModelNotReady, ProviderError
from openmaic.steps.brief import ResearchSource, Voice
from openmaic.store.database import Database

__all__ = ["MAX_SOURCES", "Research", "narrate", "research", "script_of"]

log = logging.getLogger(__name__)

MAX_SOURCES = 5


class Research(msgspec.Struct, frozen=True, kw_only=True):
    """What the research step found: ``sources``, or nothing because no provider is set (``skipped``) or it failed
    (``error``). A run records it as ``run.research_done``."""

    sources: list[ResearchSource] = []
    skipped: bool = False
    error: str | None = None


async def research(media: MediaRouter | None, owner: str, requirement: str) -> Research:
    """What the web search finds for ``requirement`` (see the module docstring)."""
    try:
        route = await media.for_owner(owner, "webSearch") if media is not None else None
    except ModelNotReady as exc:  # assigned but unusable: research fails, the run goes on without it
        log.warning("research for %s cannot run: %s", owner, exc.message)
        return Research(error=exc.message)
    if route is None:
        return Research(skipped=True)
    provider, _model = route
    try:
        found = await provider.search(requirement, max_results=MAX_SOURCES)
    except ProviderError as exc:
        log.warning("research for %s failed; the outline is written without it: %s", owner, exc.message)
        return Research(error=exc.message)
    return Research(sources=[ResearchSource(title=s.title, url=s.url, content=s.content) for s in found])


def script_of(actions: Sequence[fmt.Action]) -> str:
    """What a scene's narration says: its speech, in order."""
    return " ".join(" ".join(a.text.split()) for a in actions if isinstance(a, fmt.SpeechAction) and a.text.strip())


async def narrate(
    media: MediaRouter | None, db: Database, owner: str, course_id: str, actions: Sequence[fmt.Action], *,
    quota_bytes: int, voice: Voice | None = None,
) -> tuple[list[fmt.Action], bool]:
    """``(actions, unvoiced)``: the scene's actions with each speech's narration clip stored in the owner's asset
    store and named by its ``audioId`` (OpenMAIC narrates per speech action). With no speech provider the actions
    come back as they are; ``unvoiced`` is True when the asset store refused a clip (that speech keeps no audio).
    Provider errors propagate."""
    route = await media.for_owner(owner, "tts") if media is not None else None
    if media is None or route is None:
        return list(actions), False
    provider, model = route
    spoken: dict[str, Any] = {}
    if voice is not None and voice.provider_id in await media.names_for_owner(owner, "tts"):
        spoken = {"voice": voice.voice_id} if voice.speed is None else {"voice": voice.voice_id, "speed": voice.speed}
    out: list[fmt.Action] = []
    unvoiced = False
    for action in actions:
        text = " ".join(action.text.split()) if isinstance(action, fmt.SpeechAction) else ""
        if not text or unvoiced:
            out.append(action)
            continue
        clip = await provider.synthesize(model, text, **spoken)
        try:
            stored = await store_generated(db, owner, course_id, "narration", clip, quota_bytes=quota_bytes)
        except AssetQuotaExceeded as exc:
            log.warning("narration for course %s not stored: %s", course_id, exc.message)
            unvoiced = True
            out.append(action)
            continue
        out.append(msgspec.structs.replace(action, audioId=stored.id))
    return out, unvoiced
