"""The run's research step (web search before the outline) and its narration steps (a clip per scene).

* ``research`` asks the ``webSearch`` slot about the requirement. No provider: the step records that it did
  nothing (``skipped``). A provider failure, or a slot that cannot be used, is recorded as the step's ``error`` and the run goes on without the
  context: research is an aid to the outline, never a reason to stop a course.
* ``narrate`` speaks a scene's script (its speech actions, in order) with the ``tts`` slot and stores the clip
  in the owner's asset store. No provider: no clip. A provider failure (or a ``tts`` slot that cannot be used:
  ``MissingModel`` / ``MissingApiKey``) propagates, so the step fails, is retried,
  and pauses the run like any step; ``retry`` then resumes at that step. A full asset store leaves the scene
  unvoiced (counted in the job's warning) rather than stopping the course. The run's ``voice`` (OpenMAIC's
  ``{providerId, voiceId, speed}``) is spoken with when its ``providerId`` names the provider serving the ``tts``
  slot (by its id or its preset's); a voice of another provider would be refused by this one, so the slot's
  provider then speaks with its own default voice.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from openmaic.courses.schema import SceneActions
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


def script_of(actions: SceneActions) -> str:
    """What a scene's narration says: its speech and questions, in order."""
    return " ".join(" ".join(a.text.split()) for a in actions.actions if a.kind in ("speech", "ask") and a.text.strip())


async def narrate(
    media: MediaRouter | None, db: Database, owner: str, course_id: str, actions: SceneActions, *, quota_bytes: int,
    voice: Voice | None = None,
) -> tuple[str | None, bool]:
    """``(asset id, unvoiced)`` of the scene's narration clip: ``(None, False)`` with no speech provider or
    nothing to say, ``(None, True)`` when the asset store refused the clip. Provider errors propagate."""
    route = await media.for_owner(owner, "tts") if media is not None else None
    script = script_of(actions)
    if media is None or route is None or not script:
        return None, False
    provider, model = route
    spoken: dict[str, Any] = {}
    if voice is not None and voice.provider_id in await media.names_for_owner(owner, "tts"):
        spoken = {"voice": voice.voice_id} if voice.speed is None else {"voice": voice.voice_id, "speed": voice.speed}
    clip = await provider.synthesize(model, script, **spoken)
    try:
        stored = await store_generated(db, owner, course_id, "narration", clip, quota_bytes=quota_bytes)
    except AssetQuotaExceeded as exc:
        log.warning("narration for course %s not stored: %s", course_id, exc.message)
        return None, True
    return stored.id, False
